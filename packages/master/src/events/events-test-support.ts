/**
 * What the events and webhooks route tests share: teams made through the master's team routes,
 * sandboxes made for a team, and raw HTTP calls to the master with a team's header (the answer's
 * text kept, so a test can look for what must not be in it).
 */
import assert from 'node:assert/strict';
import { randomId } from '@svc/common';
import { MasterClient, type CreateSandboxInput } from '@svc/contracts/master';
import { TEAM_HEADER, TeamsClient } from '@svc/contracts/teams';
import type { MasterOverFakeNode } from '../testing/master-over-fake-node.ts';

export interface Answer {
  status: number;
  text: string;
  body: any;
}

/** One call to the master; team undefined is the operator's (no header: the default team). */
export async function send(h: MasterOverFakeNode, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, o: { team?: string; body?: unknown } = {}): Promise<Answer> {
  const headers: Record<string, string> = o.team ? { [TEAM_HEADER]: o.team } : {};
  const withBody = 'body' in o;
  if (withBody) headers['content-type'] = 'application/json';
  const res = await fetch(`${h.master.url}${path}`, { method, headers, ...(withBody ? { body: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) } : {}) });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, text, body };
}

/** A new team, made by the operator through the master's team routes; answers its id. */
export async function newTeam(h: MasterOverFakeNode): Promise<string> {
  const made = await new TeamsClient(h.master.url).createTeam({ name: `team-${randomId(8)}` });
  return made.team.teamId;
}

/** The master's gateway-facing client as the team calls it (undefined: the operator). */
export function clientOf(h: MasterOverFakeNode, team: string | undefined): MasterClient {
  const api = new MasterClient(h.master.url);
  return team ? api.with({ [TEAM_HEADER]: team }) : api;
}

const SANDBOX_INPUT: CreateSandboxInput = {
  template: 'base', timeout: 300, onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
  network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
};

export async function newSandbox(h: MasterOverFakeNode, team: string | undefined, extra: Partial<CreateSandboxInput> = {}): Promise<string> {
  return (await clientOf(h, team).createSandbox({ ...SANDBOX_INPUT, ...extra })).sandboxId;
}

/** A 400 whose JSON body is { code, message } with the message matching. */
export function assertBadRequest(r: Answer, message: RegExp, what: string): void {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(typeof r.body, 'object', `${what}: a JSON body`);
  assert.equal(r.body.code, 400, `${what}: ${r.text}`);
  assert.equal(typeof r.body.message, 'string', what);
  assert.match(r.body.message, message, what);
}

/** Waits until check answers true, or fails after timeoutMs. */
export async function eventually(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
