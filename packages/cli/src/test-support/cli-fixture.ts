/**
 * The fixture of the cli-*.test.ts files: the `svc` CLI bundled and run as a child process, with
 * the fake API (key-1) and the envd double it runs against; the tests that need the real gateway
 * start their own over the master's fake node agent.
 *
 * The state is in exported `let`s, filled by startCliFixture: an import is a live binding, so the
 * tests read `api` and `envd` as plain names.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startFakeApi, type FakeApi } from '@svc/sdk/testing/fake-api';
import { startFakeEnvd, type FakeEnvd } from '@svc/sdk/testing/fake-envd';
import { bundleSvc } from './svc-child.ts';

export const MAIN = resolve(import.meta.dirname, '../main.ts');
export const BIN = resolve(import.meta.dirname, '../../bin/svc.mjs');

interface Run { code: number; stdout: string; stderr: string }

export let api: FakeApi;
export let envd: FakeEnvd;
let home: string;
/** The CLI bundled as `npm run build` does: a child process of it starts in a fraction of tsx's time. */
let bundle: string;

function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, SVC_POLL_INTERVAL_MS: '20' };
  return { ...env, ...extra };
}

export function svc(args: string[], env: Record<string, string> = {}, entry: string[] = [bundle]): Promise<Run> {
  return new Promise((res) => {
    execFile(process.execPath, [...entry, ...args], { env: baseEnv(env), cwd: resolve(import.meta.dirname, '../../../..') }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, stdout, stderr });
    });
  });
}

/** As svc, with `input` on its standard input (closed at once without it). */
export function svcWithInput(args: string[], env: Record<string, string>, input?: string): Promise<Run> {
  return new Promise((res) => {
    const child = execFile(process.execPath, [bundle, ...args], { env: baseEnv(env) }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      res({ code, stdout, stderr });
    });
    child.stdin!.end(input ?? '');
  });
}

/** Runs against the fake API with the key in the environment. */
export const run = (args: string[], env: Record<string, string> = {}) =>
  svc(args, { SVC_API_URL: api.url, SVC_API_KEY: 'key-1', ...env });

export const json = (r: Run) => {
  assert.equal(r.code, 0, `exit ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

/** The fakes the commands talk to, and a home directory with the CLI bundled into it. */
export async function startCliFixture(): Promise<void> {
  api = await startFakeApi({ apiKey: 'key-1' });
  envd = await startFakeEnvd();
  home = mkdtempSync(join(tmpdir(), 'svc-cli-home-'));
  bundle = await bundleSvc(home);
}

export async function stopCliFixture(): Promise<void> {
  await api.close();
  await envd.close();
  rmSync(home, { recursive: true, force: true });
}
