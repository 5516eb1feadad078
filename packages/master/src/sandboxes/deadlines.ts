import type { SandboxRecord } from '@svc/contracts/master';
import type { DueSandbox } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import { toRecord } from './record.ts';
import { deadlineOf, liveRow, rereadRow } from './rows.ts';
import type { Row } from './repo.ts';
import * as T from './timeouts.ts';

export async function setSandboxTimeout(c: SandboxContext, id: string, timeout: number): Promise<SandboxRecord> {
  const d = T.atSetTimeout(Date.now(), timeout);
  await liveRow(c, id);
  await c.d.repo.update(id, { timeout_sec: d.timeoutSec, end_at: d.endAt });
  return deadlineMoved(c, await rereadRow(c, id));
}

export async function refreshSandbox(c: SandboxContext, id: string, duration: number | undefined): Promise<SandboxRecord> {
  const row = await liveRow(c, id);
  const d = T.atRefresh(Date.now(), deadlineOf(row), duration);
  await c.d.repo.update(id, { end_at: d.endAt });
  return deadlineMoved(c, await rereadRow(c, id));
}

/** A new deadline is E2B's `updated` event, its `set_timeout` the deadline (none when it never ends). */
async function deadlineMoved(c: SandboxContext, row: Row): Promise<SandboxRecord> {
  await c.t.recordChange(row, 'sandbox.lifecycle.updated', row.end_at === null ? {} : { set_timeout: new Date(Number(row.end_at)).toISOString() });
  return toRecord(row);
}

export async function recordActivity(c: SandboxContext, ids: string[]): Promise<void> {
  // One statement per batch: a batch larger than a busy node's second of traffic is cut.
  await c.d.repo.touch(ids.slice(0, 10_000), Date.now());
}

export async function dueSandboxes(c: SandboxContext): Promise<DueSandbox[]> {
  const rows = await c.d.repo.due(Date.now());
  const out: DueSandbox[] = [];
  for (const r of rows) {
    const rec = c.damaged.read(r);
    if (rec) out.push({ sandboxId: rec.sandboxId, state: rec.state, onTimeout: rec.lifecycle.onTimeout, endAt: rec.endAt! });
  }
  return out;
}
