import { notFound, SvcError, unavailable } from '@svc/common';
import type { TerminateReason } from '@svc/contracts/master-internal';
import type { SandboxContext } from './context.ts';
import { dropEgress, egressPlanOf } from './egress.ts';
import { deleteOnNode, dropPausePackage } from './on-node.ts';
import { assertStillDue, busyMessage } from './rows.ts';

const DELETE_TIMEOUT_MS = 30_000;

/** DELETE: synchronous; 503 + Retry-After while pausing or locked; 404 when unknown or already gone. */
export async function killSandbox(c: SandboxContext, id: string, reason: TerminateReason = 'killed'): Promise<void> {
  const row = await c.d.repo.get(id);
  if (!row || row.state === 'terminated') throw notFound(`sandbox ${id} not found`);
  if (row.state === 'pausing' || row.state === 'resuming' || row.state === 'killing') {
    throw unavailable(`sandbox ${id} is ${row.state}; retry the delete`, 2);
  }
  await c.t.locked(id, () => unavailable(busyMessage(id, 'retry the delete'), 2), async () => {
    const cur = await c.d.repo.get(id);
    if (!cur || cur.state === 'terminated') throw notFound(`sandbox ${id} not found`);
    if (reason === 'timeout') assertStillDue(cur);
    if (!(await c.t.move(id, { trigger: 'kill', reason }))) {
      throw unavailable(`sandbox ${id} is ${cur.state}; retry the delete`, 2);
    }
    try {
      const client = await c.d.nodes.client(cur.node_id);
      await deleteOnNode(c, client, id, c.d.deleteTimeoutMs ?? DELETE_TIMEOUT_MS);
    } catch (err) {
      const e = err as SvcError;
      if (e.status === 504) {
        await c.t.move(id, { trigger: 'kill-failed', to: cur.state as 'running' | 'paused', reason });
        throw new SvcError(408, `sandbox ${id} did not stop within ${(c.d.deleteTimeoutMs ?? DELETE_TIMEOUT_MS) / 1000} s`);
      }
      // 404: already gone on the node. Unreachable node: it removes orphans when it registers again.
      if (e.status !== 404) c.d.logger.warn({ sandboxId: id, err: e.message }, 'node delete failed; marking terminated');
    }
    // Not moved only when a sweep found it ended meanwhile and announced that: it is terminated either way.
    await c.t.move(id, { trigger: 'killed', reason, patch: { terminated_at: Date.now(), terminate_reason: reason, end_at: null, pause_snapshot_id: null } });
    dropEgress(c, cur.node_id, id, egressPlanOf(c, cur));
    void dropPausePackage(c, id, cur.pause_snapshot_id);
  });
  if (reason === 'timeout') c.d.logger.info({ sandboxId: id }, 'sandbox timed out and was killed');
}

/** Kills every sandbox of a team, running or paused (E2B's admin kill). */
export async function killTeam(c: SandboxContext, teamId: string): Promise<{ killedCount: number; failedCount: number }> {
  const out = { killedCount: 0, failedCount: 0 };
  const failed = new Set<string>();
  for (;;) {
    const rows = await c.d.repo.list({ states: ['running', 'paused'], teamId, limit: 100 });
    const batch = rows.filter((r) => !failed.has(r.sandbox_id));
    if (batch.length === 0) break;
    for (const r of batch) {
      try {
        await killSandbox(c, r.sandbox_id, 'killed');
        out.killedCount++;
      } catch (err) {
        c.d.logger.warn({ sandboxId: r.sandbox_id, teamId, err: (err as Error).message }, 'team-wide kill: a sandbox could not be killed');
        failed.add(r.sandbox_id);
        out.failedCount++;
      }
    }
  }
  return out;
}
