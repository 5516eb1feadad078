import { conflict, unavailable } from '@svc/common';
import type { ConnectResult, SandboxRecord } from '@svc/contracts/master';
import type { LifecycleReason, SandboxRoute } from '@svc/contracts/master-internal';
import type { NodeSandbox } from '@svc/contracts/node-agent';
import type { SandboxContext } from './context.ts';
import { egressPlanOf, pushEgress } from './egress.ts';
import { countResumed } from '../prometheus/operations.ts';
import { moveAndResume } from './move.ts';
import { attaching, dropPausePackage, recordedVolumes } from './on-node.ts';
import { toRecord, toRoute } from './record.ts';
import type { Row } from './repo.ts';
import { busyMessage, deadlineOf, envOf, liveRow, passThrough, rereadRow, settledRow } from './rows.ts';
import * as T from './timeouts.ts';

/** How long a resume that found its sandbox paused waits for the pause to let go of the lock. */
export const RESUME_LOCK_WAIT_MS = 2_000;

/** connect(timeout): resumes a paused sandbox; 200 when it was running, 201 when it resumed. */
export async function connectSandbox(c: SandboxContext, id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<ConnectResult> {
  if (timeout !== undefined && timeout !== null) T.atConnect(Date.now(), { timeoutSec: -1, endAt: null }, timeout, false);
  const row = await settledRow(c, id);
  if (row.state === 'running') {
    const d = T.atConnect(Date.now(), deadlineOf(row), timeout, false);
    await c.d.repo.update(id, { timeout_sec: d.timeoutSec, end_at: d.endAt });
    return { resumed: false, sandbox: toRecord(await rereadRow(c, id)) };
  }
  const sandbox = await resumeRow(c, row, 'connect', (now, cur) => T.atConnect(now, cur, timeout, true), opts);
  return { resumed: true, sandbox };
}

/** Deprecated resume(timeout). */
export async function resumeSandbox(c: SandboxContext, id: string, timeout: number | undefined, opts: { memory?: boolean } = {}): Promise<SandboxRecord> {
  if (timeout !== undefined && timeout !== null) T.atResume(Date.now(), { timeoutSec: -1, endAt: null }, timeout);
  const row = await settledRow(c, id);
  if (row.state === 'running') throw conflict(`sandbox ${id} is already running`);
  return resumeRow(c, row, 'api', (now, cur) => T.atResume(now, cur, timeout), opts);
}

/**
 * A drain's move: the paused sandbox resumes (on another node when its package is stored); its
 * idle clock restarts. Without admission: it puts back a sandbox the drain itself paused a
 * moment ago (or wakes a frozen one to store it, paused again at once), and a create of its team
 * in between, which took the place the pause gave back, must not strand it paused.
 */
export async function resumeMoved(c: SandboxContext, id: string): Promise<SandboxRecord> {
  const row = await settledRow(c, id);
  if (row.state === 'running') return toRecord(row);
  return resumeRow(c, row, 'drain', T.restartWindow, {}, false);
}

/** Auto-resume from the lifecycle manager: the idle clock restarts with the same length. */
export async function resumeForTraffic(c: SandboxContext, id: string, reason: LifecycleReason): Promise<SandboxRoute> {
  const row = await settledRow(c, id);
  if (row.state === 'running') return toRoute(row);
  if (row.pause_kind === 'filesystem') throw conflict(`sandbox ${id} was paused without its memory; traffic does not resume it, connect does`);
  await resumeRow(c, row, reason, T.restartWindow);
  return toRoute(await rereadRow(c, id));
}

/** A resume, timed (svc_sandbox_resume_duration_seconds); whichever way it was asked for. */
async function resumeRow(c: SandboxContext, row: Row, reason: LifecycleReason, nextDeadline: (now: number, cur: T.Deadline) => T.Deadline, opts: { memory?: boolean } = {}, admit = true): Promise<SandboxRecord> {
  const startedAt = performance.now();
  const resumed = await resumePaused(c, row, reason, nextDeadline, opts, admit);
  countResumed(startedAt);
  return resumed;
}

async function resumePaused(c: SandboxContext, row: Row, reason: LifecycleReason, nextDeadline: (now: number, cur: T.Deadline) => T.Deadline, opts: { memory?: boolean }, admit: boolean): Promise<SandboxRecord> {
  const id = row.sandbox_id;
  if (row.state !== 'paused') throw conflict(`sandbox ${id} is ${row.state}; another lifecycle operation is settling, retry later`);
  // A paused sandbox holds no place in its team's quota; resuming takes one again (a drain's aside: resumeMoved).
  const release = !admit ? async () => {} : await c.quota.admit(row.team_id, { memoryMB: row.memory_mb, cpuCount: row.cpu_count, newSandbox: false });
  return c.t.locked(id, () => conflict(busyMessage(id)), async () => {
    if (!(await c.t.move(id, { trigger: 'resume', reason }))) {
      const cur = await liveRow(c, id);
      throw conflict(`sandbox ${id} is ${cur.state}; another lifecycle operation is settling, retry later`);
    }
    // Read again under the lock: a drain may have stored its package since.
    const cur = await rereadRow(c, id);
    const standing = await c.d.nodes.standing(cur.node_id);
    if (standing !== 'ready' && cur.pause_snapshot_id && c.d.pausePackages) return moveAndResume(c, cur, standing, reason, nextDeadline);
    if (standing === 'lost') {
      await c.t.move(id, { trigger: 'resume-failed', reason });
      throw unavailable(`sandbox ${id} is paused on node ${cur.node_id}, which is not answering, and its state is not in the artifact store; it resumes when the node returns`, 5);
    }
    let node: NodeSandbox;
    try {
      // A sandbox that boots again from its files is given its identity anew (the node keeps no secrets).
      const boots = cur.pause_kind === 'filesystem' || opts.memory === false;
      // Its volumes attach again at the boot: their current records, re-validated (404 for one deleted since).
      const volumes = boots ? await recordedVolumes(c, cur, cur.node_id) : [];
      // Claimed until the node's answer: a DELETE of one of them refuses meanwhile.
      node = await attaching(c, volumes.map((v) => v.volumeId), async () => {
        const answer = await (await c.d.nodes.client(cur.node_id)).resumeSandbox(id, boots ? {
          ...(opts.memory === false ? { memory: false } : {}),
          envVars: envOf(cur),
          ...(cur.envd_access_token ? { envdAccessToken: cur.envd_access_token } : {}),
          ...(volumes.length ? { volumes } : {}),
        } : {});
        await c.d.volumes?.applyFlips(answer.extInfo?.volumeRefFlips);
        return answer;
      });
    } catch (err) {
      await c.t.move(id, { trigger: 'resume-failed', reason });
      throw passThrough(err, `resume of sandbox ${id} failed`);
    }
    // A sandbox that booted again may have a new address; the proxy finds it by its address. Set
    // before the move announces the sandbox running, so its first requests find their policy.
    await pushEgress(c, cur.node_id, id, node.address, egressPlanOf(c, cur), cur.team_id).catch((err: Error) => {
      c.d.logger.error({ sandboxId: id, err: err.message }, 'resumed sandbox\'s egress policy could not be set; the proxy refuses its requests until the policy is set again');
    });
    const d = nextDeadline(Date.now(), deadlineOf(cur));
    await c.t.mustMove(id, { trigger: 'resumed', reason, patch: { pause_kind: null, pause_snapshot_id: null, address: node.address, timeout_sec: d.timeoutSec, end_at: d.endAt } });
    void dropPausePackage(c, id, cur.pause_snapshot_id);
    return toRecord(await rereadRow(c, id));
  }, RESUME_LOCK_WAIT_MS).finally(release);
}
