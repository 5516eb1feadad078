import { SvcError, withRenewedLock, type Coordination, type Logger } from '@svc/common';
import type { DueSandbox, MasterInternalClient } from '@svc/contracts/master-internal';
import { sandboxLockName } from './sandbox-lock.ts';

export type SweepAction = 'pause' | 'kill';

/** What the idle timeout does to a due sandbox: pause a running one, or kill a running or paused one. */
export function actionFor(d: DueSandbox): SweepAction | null {
  if (d.onTimeout === 'pause') return d.state === 'running' ? 'pause' : null;
  if (d.onTimeout === 'kill') return d.state === 'running' || d.state === 'paused' ? 'kill' : null;
  return null;
}

export interface SweepOutcome {
  paused: string[];
  killed: string[];
  /** Locked by another replica, or a state change made the master refuse. */
  skipped: string[];
  failed: string[];
}

export interface SweeperDeps {
  master: MasterInternalClient;
  coord: Coordination;
  replicaId: string;
  logger: Logger;
  lockTtlMs: number;
  concurrency: number;
  /** Checked before every action: a replica that lost the lease mid-sweep stops at once. */
  mayAct: () => boolean;
}

/** One idle sweep: asks the master what is due and pauses or kills each, under its lock. */
export class Sweeper {
  private seq = 0;
  constructor(private readonly d: SweeperDeps) {}

  async sweepOnce(): Promise<SweepOutcome> {
    const out: SweepOutcome = { paused: [], killed: [], skipped: [], failed: [] };
    if (!this.d.mayAct()) return out;
    const due = await this.d.master.due();
    const work = due.map((s) => ({ s, action: actionFor(s) })).filter((w): w is { s: DueSandbox; action: SweepAction } => w.action !== null);
    let next = 0;
    const worker = async () => {
      while (next < work.length) {
        const w = work[next++];
        if (!this.d.mayAct()) return;
        await this.act(w.s, w.action, out);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.d.concurrency, work.length) }, worker));
    return out;
  }

  private async act(s: DueSandbox, action: SweepAction, out: SweepOutcome): Promise<void> {
    const { master, logger } = this.d;
    const holder = `${this.d.replicaId}:sweep:${++this.seq}`;
    try {
      const r = await withRenewedLock(this.d.coord, sandboxLockName(s.sandboxId), holder, this.d.lockTtlMs, async () => {
        if (!this.d.mayAct()) return false;
        if (action === 'pause') {
          await master.pause(s.sandboxId, 'timeout');
          logger.info({ sandboxId: s.sandboxId }, 'auto-paused sandbox');
          out.paused.push(s.sandboxId);
        } else {
          await master.kill(s.sandboxId, 'timeout');
          logger.info({ sandboxId: s.sandboxId, was: s.state }, 'timeout-killed sandbox');
          out.killed.push(s.sandboxId);
        }
        return true;
      });
      if (!r.acquired || !r.value) out.skipped.push(s.sandboxId);
    } catch (err) {
      const e = err as SvcError;
      if (e instanceof SvcError && (e.status === 409 || e.status === 404)) {
        // Its state moved on since the due list (resumed, killed, already pausing).
        logger.debug({ sandboxId: s.sandboxId, action, status: e.status }, 'sweep action no longer applies');
        out.skipped.push(s.sandboxId);
      } else {
        logger.warn({ sandboxId: s.sandboxId, action, err: e?.message }, 'sweep action failed');
        out.failed.push(s.sandboxId);
      }
    }
  }
}
