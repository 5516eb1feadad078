import { conflict, unavailable } from '@svc/common';
import type { LifecycleReason } from '@svc/contracts/master-internal';
import type { SandboxRecord } from '@svc/contracts/master';
import type { SandboxContext } from './context.ts';
import { countPaused } from '../prometheus/operations.ts';
import { dropPausePackage } from './on-node.ts';
import { toRecord } from './record.ts';
import type { Row } from './repo.ts';
import { RESUME_LOCK_WAIT_MS } from './resume.ts';
import { assertStillDue, busyMessage, liveRow, passThrough, rereadRow } from './rows.ts';

/**
 * memory false (or, at the idle timeout, a sandbox created with autoPauseMemory false): a
 * filesystem pause, which frees the memory and keeps the files; connect boots it again. A pause
 * that succeeds is timed (svc_sandbox_pause_duration_seconds).
 */
export async function pauseSandbox(c: SandboxContext, id: string, reason: LifecycleReason = 'api', opts: { memory?: boolean; store?: boolean } = {}): Promise<SandboxRecord> {
  const startedAt = performance.now();
  const paused = await pauseChecked(c, id, reason, opts);
  countPaused(startedAt);
  return paused;
}

async function pauseChecked(c: SandboxContext, id: string, reason: LifecycleReason, opts: { memory?: boolean; store?: boolean }): Promise<SandboxRecord> {
  const row = await liveRow(c, id);
  const keepMemory = opts.memory ?? (reason === 'timeout' ? Number(row.auto_pause_memory) !== 0 : true);
  if (row.state === 'paused') throw conflict(`sandbox ${id} is already paused`);
  if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; retry later`);
  return c.t.locked(id, () => conflict(busyMessage(id)), async () => {
    if (reason === 'timeout') assertStillDue(await rereadRow(c, id));
    if (!(await c.t.move(id, { trigger: 'pause', reason }))) {
      const cur = await liveRow(c, id);
      throw conflict(cur.state === 'paused' ? `sandbox ${id} is already paused` : `sandbox ${id} is ${cur.state}; retry later`);
    }
    try {
      const node = await (await c.d.nodes.client(row.node_id)).pauseSandbox(id, keepMemory ? {} : { memory: false });
      const pauseKind = node.pauseKind ?? 'freeze';
      // Stored while the row still says pausing: a connect waits for the package to be whole.
      const stored = await storePause(c, row, pauseKind, opts.store === true);
      await c.t.mustMove(id, { trigger: 'paused', reason, patch: { pause_kind: pauseKind, pause_snapshot_id: stored ?? null } });
      await c.d.volumes?.applyFlips(node.extInfo?.volumeRefFlips);
    } catch (err) {
      await c.t.move(id, { trigger: 'pause-failed', reason });
      throw passThrough(err, `pause of sandbox ${id} failed`);
    }
    return toRecord(await rereadRow(c, id));
  });
}

/**
 * Copies a paused sandbox's state into the artifact store when master.pause_to_store says so
 * (or `force`, a drain): its package id, or undefined (a frozen sandbox has none; a failure is
 * logged and leaves the sandbox paused on its node alone).
 */
async function storePause(c: SandboxContext, row: Row, pauseKind: string, force: boolean): Promise<string | undefined> {
  if (!c.d.pausePackages || pauseKind === 'freeze') return undefined;
  const policy = c.d.cfg.master.pause_to_store;
  if (!force && (policy === 'never' || (policy === 'auto' && (await c.d.nodes.count()) < 2))) return undefined;
  try {
    const stored = await c.d.pausePackages.store({
      sandboxId: row.sandbox_id, nodeId: row.node_id, templateId: row.template_id, teamId: row.team_id,
      cpuCount: Number(row.cpu_count), memoryMB: Number(row.memory_mb), diskSizeMB: Number(row.disk_size_mb),
    });
    return stored.snapshotId;
  } catch (err) {
    c.d.logger.warn({ sandboxId: row.sandbox_id, nodeId: row.node_id, err: (err as Error).message }, 'pause package not stored: the sandbox resumes only on its own node');
    return undefined;
  }
}

/**
 * Stores the package of a sandbox already paused without one (a drain): 409 when it is not
 * paused, or paused by freezing (which cannot be captured).
 */
export async function storePausePackage(c: SandboxContext, id: string): Promise<void> {
  await c.t.locked(id, () => conflict(busyMessage(id)), async () => {
    const row = await liveRow(c, id);
    if (row.state !== 'paused') throw conflict(`sandbox ${id} is ${row.state}, not paused`);
    if (row.pause_snapshot_id) return;
    if (row.pause_kind === 'freeze') throw conflict(`sandbox ${id} is paused by freezing, which cannot be captured`);
    const stored = await storePause(c, row, row.pause_kind ?? 'freeze', true);
    if (!stored) throw unavailable(`the pause package of sandbox ${id} could not be stored (the master's log says why)`, 5);
    if (!(await c.d.repo.updateIn(id, ['paused'], { pause_snapshot_id: stored }))) await dropPausePackage(c, id, stored);
  }, RESUME_LOCK_WAIT_MS);
}
