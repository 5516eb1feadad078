import { badRequest } from '@svc/common';
import type { ListSandboxesQuery, SandboxPage, SandboxRecord } from '@svc/contracts/master';
import type { SandboxState } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import type { SandboxRepo } from './repo.ts';

/** A team's sandboxes (undefined: every team's, the operator's view). */
export async function listSandboxes(c: SandboxContext, q: ListSandboxesQuery, caller?: string): Promise<SandboxPage> {
  for (const k of ['metadata', 'template', 'nextToken', 'order', 'startedAfter', 'startedBefore'] as const) {
    if (q[k] !== undefined && typeof q[k] !== 'string') throw badRequest(`${k} must be given once`);
  }
  // A repeated ?state= arrives as a list; it means the same as a comma list.
  const states = parseStates(Array.isArray(q.state) ? q.state.join(',') : q.state);
  const limit = q.limit === undefined ? 100 : Number(q.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw badRequest('limit must be an integer from 1 to 1000');
  if (q.order !== undefined && q.order !== 'asc' && q.order !== 'desc') throw badRequest('order must be asc or desc');
  const order = q.order ?? 'desc';
  const startedAfter = parseInstant(q.startedAfter, 'startedAfter');
  const startedBefore = parseInstant(q.startedBefore, 'startedBefore');
  const filter = parseMetadataFilter(q.metadata);
  const templateIds = q.template ? await c.d.templates.idsFor(q.template) : undefined;
  let after = q.nextToken ? decodeToken(q.nextToken) : undefined;
  const query = { states, templateIds, order, startedAfter, startedBefore, teamId: caller } as const;
  const totalRunning = await c.d.repo.countRunning(caller);
  const out: SandboxRecord[] = [];
  // Metadata is JSON in a text column on three engines: filter here, page until the page is full.
  for (;;) {
    const rows = await c.d.repo.list({ ...query, after, limit: limit + 1 });
    for (const r of rows.slice(0, limit)) {
      if (out.length === limit) break;
      after = { startedAt: Number(r.started_at), id: r.sandbox_id };
      const rec = c.damaged.read(r);
      if (rec && filter.every(([k, v]) => rec.metadata[k] === v)) out.push(rec);
    }
    if (out.length === limit) {
      // A next page only when a sandbox that passes the filter follows: E2B's last page has no token.
      const more = filter.length === 0
        ? rows.length > limit || (await c.d.repo.list({ ...query, after, limit: 1 })).length > 0
        : await matchFollows(c, { ...query, after: after! }, filter);
      return { sandboxes: out, totalRunning, ...(more ? { nextToken: encodeToken(after!) } : {}) };
    }
    if (rows.length <= limit) return { sandboxes: out, totalRunning };
  }
}

/** Whether a row after the cursor passes the metadata filter (read a page at a time). */
async function matchFollows(c: SandboxContext, q: Omit<Parameters<SandboxRepo['list']>[0], 'limit'>, filter: Array<[string, string]>): Promise<boolean> {
  const page = 200;
  let after = q.after;
  for (;;) {
    const rows = await c.d.repo.list({ ...q, after, limit: page });
    for (const r of rows) {
      const rec = c.damaged.read(r);
      if (rec && filter.every(([k, v]) => rec.metadata[k] === v)) return true;
    }
    if (rows.length < page) return false;
    const last = rows[rows.length - 1];
    after = { startedAt: Number(last.started_at), id: last.sandbox_id };
  }
}

function parseStates(s: string | undefined): SandboxState[] {
  if (!s) return ['running', 'paused', 'pausing', 'resuming'];
  const out: SandboxState[] = [];
  for (const part of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    if (part === 'running') out.push('running', 'resuming');
    else if (part === 'paused') out.push('paused', 'pausing');
    else throw badRequest(`state must be running or paused (got ${JSON.stringify(part)})`);
  }
  return out;
}

/** E2B sends `metadata=k%3Dv%26k2%3Dv2`: URL-encoded pairs, each key and value encoded again. */
function parseMetadataFilter(s: string | undefined): Array<[string, string]> {
  if (!s) return [];
  const out: Array<[string, string]> = [];
  for (const [k, v] of new URLSearchParams(s)) {
    try {
      out.push([decodeURIComponent(k), decodeURIComponent(v)]);
    } catch {
      throw badRequest('metadata filter is not valid URL encoding');
    }
  }
  return out;
}

function encodeToken(a: { startedAt: number; id: string }): string {
  return Buffer.from(`${a.startedAt}:${a.id}`).toString('base64url');
}

function decodeToken(t: string): { startedAt: number; id: string } {
  // At most 13 digits (epoch ms to the year 2286): a longer run is no token this master wrote,
  // and PostgreSQL's bigint refused it with a 500.
  const m = /^(\d{1,13}):([a-z0-9]+)$/.exec(Buffer.from(t, 'base64url').toString());
  if (!m) throw badRequest('nextToken is not valid: pass the token the previous page gave, as it came');
  return { startedAt: Number(m[1]), id: m[2] };
}

/** An ISO 8601 instant of a list filter, as epoch milliseconds. */
function parseInstant(v: string | undefined, field: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const ms = Date.parse(v);
  if (!Number.isFinite(ms)) throw badRequest(`${field} must be an ISO 8601 timestamp, such as 2026-01-31T12:00:00Z`);
  return ms;
}
