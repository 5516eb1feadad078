/**
 * What the official e2b SDK's whole-platform tests (e2b-sdk.test.ts and its cases under e2b-sdk/)
 * share: the SDK under test, how its errors carry an HTTP status, and the one `svc up` the suite
 * starts with the SDK's environment (E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY) pointed at it,
 * then stops with a check that it left nothing behind. SVC_E2B_SDK names another release installed beside the
 * pinned one under an npm alias (e2b-2.46: the one E2B's self-hosted Embed pinned), which
 * scripts/test.sh runs these files with too (docs/compatibility.md).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type * as E2b from 'e2b';
import { sandboxProcessesAll, startPlatform, useE2bEnv, type RunningPlatform } from './harness.ts';

const SDK = process.env.SVC_E2B_SDK || 'e2b';
export const { Sandbox, CommandExitError, NotFoundError, Template, waitForFile } = (await import(SDK)) as typeof E2b;
export type Sandbox = E2b.Sandbox;
/** The HTTP status an SDK error carries: 2.51 as statusCode, 2.46 only at the start of its message ("400: ..."). */
export const hasStatus = (e: Error & { statusCode?: number }, status: number) => e.statusCode === status || e.message.startsWith(`${status}: `);
console.log(`# the official SDK under test: ${SDK}`);

let running: RunningPlatform | undefined;

/** The platform under test, once the suite's `before` hook started it (undefined before). */
export const startedPlatform = (): RunningPlatform | undefined => running;

/** The platform under test, for a case. */
export function platform(): RunningPlatform {
  if (!running) throw new Error('svc up did not start: the before hook said why');
  return running;
}

/** For the suite's `before` hook: `svc up`, with the SDK's environment pointed at it. */
export async function startSdkPlatform(): Promise<void> {
  running = await startPlatform();
  useE2bEnv(running);
}

/** For the suite's `after` hook: stops `svc up` and checks it left no sandbox process and nothing mounted. */
export async function stopSdkPlatform(): Promise<void> {
  const p = running;
  if (!p) return; // it never started: the before hook reported why
  await p.stop();
  assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(p.dataDir)), [], 'svc up left sandbox processes behind');
  // A clean stop leaves nothing of the data directory mounted (templates' artifacts, sandboxes' disks),
  // so that it can be moved or removed; the next start mounts again.
  const mounted = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]).filter((m) => m?.startsWith(`${p.dataDir}/`));
  assert.deepEqual(mounted, [], 'svc up left mounts in its data directory');
}
