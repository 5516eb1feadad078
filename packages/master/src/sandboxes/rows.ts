import { conflict, gone, notFound, SvcError, wrapError } from '@svc/common';
import type { EndedSandbox } from '@svc/contracts/node-agent';
import type { TerminateReason } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import type { Row } from './repo.ts';
import type { Deadline } from './timeouts.ts';

/** The longest a connect or resume waits for a pause or resume under way to end. */
const SETTLE_WAIT_MS = 30_000;

/** Another lifecycle operation holds the sandbox's lock; `retry` says what to retry. */
export function busyMessage(id: string, retry = 'retry later'): string {
  return `sandbox ${id} is busy with another lifecycle operation; ${retry}`;
}

/** A live (non-terminated) row: 404 when unknown, 410 when it was killed or timed out. */
export async function liveRow(c: SandboxContext, id: string): Promise<Row> {
  const row = await c.d.repo.get(id);
  if (!row) throw notFound(`sandbox ${id} not found`);
  if (row.state === 'terminated') {
    if (row.terminate_reason === 'oom') throw gone(`sandbox ${id} ran out of memory and was stopped by its host`);
    if (row.terminate_reason === 'pids_limit') throw gone(`sandbox ${id} started more processes and threads than its host allows a sandbox, and was stopped`);
    if (row.terminate_reason === 'node_lost') throw gone(`sandbox ${id} was lost with its node ${row.node_id}, which stopped answering`);
    throw gone(row.terminate_reason === 'timeout' ? `sandbox ${id} timed out and was killed` : `sandbox ${id} was killed`);
  }
  return row;
}

/**
 * The live row once no pause or resume is under way: a sandbox the API already shows as paused
 * may still be pausing, and a connect right then should resume it, not fail (seen with E2B's
 * Python SDK polling getInfo, then connecting). Waits at most SETTLE_WAIT_MS.
 */
export async function settledRow(c: SandboxContext, id: string): Promise<Row> {
  const deadline = Date.now() + SETTLE_WAIT_MS;
  for (;;) {
    const row = await liveRow(c, id);
    if (row.state !== 'pausing' && row.state !== 'resuming') return row;
    if (Date.now() > deadline) throw conflict(`sandbox ${id} is still ${row.state} after ${SETTLE_WAIT_MS / 1000} s; retry later`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A row that must exist: read again after a move under the lock, which nothing deletes. */
export async function rereadRow(c: SandboxContext, id: string): Promise<Row> {
  const row = await c.d.repo.get(id);
  if (!row) throw new SvcError(500, `the record of sandbox ${id} vanished during an operation on it`);
  return row;
}

/** The sweep works from a list that may be stale: traffic may have moved the deadline since. */
export function assertStillDue(r: Row): void {
  if (r.end_at === null || Number(r.end_at) > Date.now()) throw conflict(`sandbox ${r.sandbox_id} is no longer due: its idle deadline moved`);
}

export function deadlineOf(r: Row): Deadline {
  return { timeoutSec: r.timeout_sec, endAt: r.end_at === null ? null : Number(r.end_at) };
}

/** Node errors keep their status when they are the caller's business (404, 409), else become 503. */
export function passThrough(err: unknown, what: string): SvcError {
  const e = err as SvcError;
  if (e instanceof SvcError && (e.status === 409 || e.status === 404 || e.status === 400)) return e;
  return wrapError(err, what);
}

/** The master's reason for a sandbox its node lost: the node's own when it knows why the host stopped it (memory, tasks). */
export function terminateReasonOf(e: EndedSandbox | undefined): TerminateReason {
  return e?.reason === 'oom' || e?.reason === 'pids_limit' ? e.reason : 'failed';
}

/** The environment a sandbox was created with (none recorded for sandboxes older than snapshots). */
export function envOf(row: Row): Record<string, string> {
  return row.env_vars ? JSON.parse(row.env_vars) as Record<string, string> : {};
}

export function iamNamesOf(row: Row): string[] {
  return row.iam ? Object.keys(JSON.parse(row.iam) as Record<string, unknown>) : [];
}
