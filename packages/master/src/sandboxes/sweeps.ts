import type { EndedSandbox } from '@svc/contracts/node-agent';
import type { SandboxState, TerminateReason } from '@svc/contracts/master-internal';
import { isLegal } from './state-table.ts';
import type { SandboxContext } from './context.ts';
import { deleteOnNode, dropPausePackage } from './on-node.ts';
import type { Row } from './repo.ts';
import { terminateReasonOf } from './rows.ts';

/**
 * Brings the records of one node in line with what it really runs: sandboxes it runs that are
 * recorded terminated, or on another node, are removed there; sandboxes recorded here that it
 * lost are terminated. One it runs that no record names at all is left to the orphan sweep
 * (removeOrphans, with its grace): a create is recorded only once its node has the sandbox, up
 * to create_timeout later, and this runs at every registration and stuck-row sweep, in the
 * middle of any team's creates on the node.
 */
export async function reconcileNode(c: SandboxContext, nodeId: string): Promise<void> {
  const client = await c.d.nodes.client(nodeId);
  const onNode = new Map((await client.listSandboxes()).map((s) => [s.sandboxId, s]));
  const rows = await c.d.repo.listByNode(nodeId);
  const known = new Set(rows.map((r) => r.sandbox_id));
  for (const [id] of onNode) {
    if (known.has(id)) continue;
    // Under its lock: a move to this node holds it until the record names this node.
    await c.t.whenFree(id, async () => {
      const r = await c.d.repo.get(id);
      if (!r || (r.node_id === nodeId && r.state !== 'terminated')) return;
      c.d.logger.info({ sandboxId: id, nodeId, recorded: { nodeId: r.node_id, state: r.state } }, 'removing a sandbox its node runs that is terminated here or recorded on another node');
      await deleteOnNode(c, client, id).catch((err: Error) => c.d.logger.warn({ sandboxId: id, nodeId, err: err.message }, 'reconcile: could not remove a sandbox the record does not put on its node; the orphan sweep tries again'));
    });
  }
  let endedOnNode: Promise<Map<string, EndedSandbox>> | undefined;
  for (const r of rows) {
    const s = onNode.get(r.sandbox_id);
    if (!s) {
      endedOnNode ??= client.listEndedSandboxes().then((l) => new Map(l.map((e) => [e.sandboxId, e])), (err: Error) => {
        c.d.logger.warn({ nodeId, err: err.message }, 'node did not say why its sandboxes ended');
        return new Map<string, EndedSandbox>();
      });
      await markEnded(c, r, terminateReasonOf((await endedOnNode).get(r.sandbox_id)));
    } else if (r.state !== s.state && isLegal(r.state as SandboxState, 'settled', s.state)) {
      // Only when no operation holds the sandbox: one under way makes this move itself.
      await c.t.whenFree(r.sandbox_id, async () => {
        await c.t.move(r.sandbox_id, { trigger: 'settled', from: [r.state as SandboxState], to: s.state, reason: 'reconcile', patch: { pause_kind: s.state === 'paused' ? s.pauseKind ?? 'freeze' : null } });
      });
    } else if (r.state === 'killing') {
      await c.t.whenFree(r.sandbox_id, async () => {
        await deleteOnNode(c, client, r.sandbox_id).catch((err: Error) => c.d.logger.warn({ sandboxId: r.sandbox_id, nodeId, err: err.message }, 'reconcile: could not remove a killed sandbox from its node; the next reconcile tries again'));
        await c.t.move(r.sandbox_id, { trigger: 'killed', reason: 'killed', patch: { terminated_at: Date.now(), terminate_reason: 'killed', end_at: null } });
      });
    }
  }
}

/**
 * Node loss (docs/cluster.md): a node silent for master.node_lost_after_sec has its running
 * sandboxes (and those mid-operation) terminated here with reason node_lost, so the API never
 * shows them running. Paused ones stay paused: their state is on the node's disk, and they
 * resume when it returns. A returning node removes what was terminated (reconcileNode).
 */
export async function sweepLostNodes(c: SandboxContext): Promise<void> {
  const silentMs = c.d.cfg.master.node_lost_after_sec * 1000;
  for (const { nodeId, lastHeartbeatAt } of await c.d.nodes.silentNodes(silentMs)) {
    for (const r of await c.d.repo.listByNode(nodeId)) {
      if (r.state === 'paused') continue;
      // A paused sandbox moving off the lost node from its package (moveAndResume) is not lost.
      if (r.state === 'resuming' && r.pause_snapshot_id) {
        await settleAbandonedMove(c, r);
        continue;
      }
      c.d.logger.warn({ sandboxId: r.sandbox_id, nodeId, state: r.state, silentSinceMs: Date.now() - lastHeartbeatAt }, 'sandbox lost with its node');
      await markEnded(c, r, 'node_lost');
    }
  }
}

/**
 * A move whose lock is free has no one doing it: a master stopped in the middle. The sandbox
 * goes back to paused with its package, and the next resume moves it again; whatever the
 * stopped move started on another node is removed by the orphan sweep (removeOrphans).
 */
async function settleAbandonedMove(c: SandboxContext, r: Row): Promise<void> {
  await c.t.whenFree(r.sandbox_id, async () => {
    if (await c.t.move(r.sandbox_id, { trigger: 'resume-failed', reason: 'node_lost' })) {
      c.d.logger.warn({ sandboxId: r.sandbox_id, nodeId: r.node_id }, 'a move to another node was abandoned midway; the sandbox is paused again with its stored state');
    }
  });
}

/**
 * Orphans (docs/cluster.md, "Orphans"): sandboxes a node runs that no record here puts there,
 * because a master stopped between a node's create and its record, a move was abandoned, a
 * rollback's removal failed, or the node came back from a partition after its sandboxes were
 * reported lost. One goes once this master has seen it unrecorded for `graceMs` (on its own
 * clock, not the node's), so a create or move under way (recorded once its node has the
 * sandbox) is never touched; and only while no one holds the sandbox's lock.
 */
export async function removeOrphans(c: SandboxContext, nodeId: string, graceMs: number): Promise<string[]> {
  const client = await c.d.nodes.client(nodeId);
  const now = Date.now();
  const removed: string[] = [];
  const ours = (r: Row | undefined) => !!r && r.node_id === nodeId && r.state !== 'terminated';
  const seen = new Map<string, number>();
  // One read of the node's records; a sandbox recorded since is first seen now, so its grace covers it.
  const recorded = new Set((await c.d.repo.listByNode(nodeId)).map((r) => r.sandbox_id));
  for (const s of await client.listSandboxes()) {
    if (recorded.has(s.sandboxId)) continue;
    const key = `${nodeId}/${s.sandboxId}`;
    const since = c.orphansSeen.get(key) ?? now;
    seen.set(key, since);
    if (now - since < graceMs) continue;
    await c.t.whenFree(s.sandboxId, async () => {
      const r = await c.d.repo.get(s.sandboxId);
      if (ours(r)) return;
      c.d.logger.warn({ sandboxId: s.sandboxId, nodeId, unrecordedSinceMs: now - since, recorded: r ? { nodeId: r.node_id, state: r.state } : null }, 'removing a sandbox its node runs and no record here puts there');
      await deleteOnNode(c, client, s.sandboxId).then(() => { removed.push(s.sandboxId); seen.delete(key); }, (err: Error) => {
        c.d.logger.warn({ sandboxId: s.sandboxId, nodeId, err: err.message }, 'orphan sweep: could not remove the sandbox; the next sweep tries again');
      });
    });
  }
  for (const key of c.orphansSeen.keys()) if (key.startsWith(`${nodeId}/`)) c.orphansSeen.delete(key);
  for (const [key, since] of seen) c.orphansSeen.set(key, since);
  return removed;
}

/** Sandboxes a node reports as ended on their own (heartbeat): terminated here with the node's reason. */
export async function recordEnded(c: SandboxContext, nodeId: string, ended: EndedSandbox[]): Promise<void> {
  for (const e of ended.slice(0, 1_000)) {
    const row = await c.d.repo.get(e.sandboxId);
    if (!row || row.node_id !== nodeId || row.state === 'terminated' || row.state === 'killing') continue;
    const reason = terminateReasonOf(e);
    c.d.logger.info({ sandboxId: e.sandboxId, nodeId, reason, message: e.message }, 'sandbox ended on its node');
    await markEnded(c, row, reason);
  }
}

/** A sandbox its node no longer runs (its row as the caller read it): terminated here, with the reason, and announced. */
async function markEnded(c: SandboxContext, row: Row, reason: TerminateReason): Promise<void> {
  const id = row.sandbox_id;
  // Not moved: it was terminated meanwhile (a kill), and that move announced it.
  if (!(await c.t.move(id, { trigger: 'ended', reason, patch: { terminated_at: Date.now(), terminate_reason: reason, end_at: null, pause_snapshot_id: null } }))) return;
  void dropPausePackage(c, id, row.pause_snapshot_id);
}
