import type { Logger } from '@svc/common';
import type { SnapshotRepo } from './repo.ts';

/** How often a capture whose layer is being copied renews its pending row's lease. */
export const LEASE_RENEW_MS = 60_000;

/**
 * Runs `copy` with the pending row `snapshotId`'s lease (lease_at) renewed every `renewMs` (SnapshotRepo.renewPending):
 * the sweeps that finish or drop pending rows (SnapshotCatalog.finishPending, PausePackageStore.sweepStale)
 * take only rows whose lease is older than their minimum age, so a copy that runs longer than that
 * is left to finish on its own. `what` names the capture in the log ("pause package", "build capture", "snapshot").
 */
export async function whileLeased<T>(repo: SnapshotRepo, logger: Logger, snapshotId: string, renewMs: number, what: string, copy: () => Promise<T>): Promise<T> {
  let copying = true;
  const timer = setInterval(() => {
    repo.renewPending(snapshotId, Date.now()).then((held) => {
      // A renewal that lands after the copy ended finds the row ready: nothing to say then.
      if (!held && copying) logger.warn({ snapshotId }, `${what}'s row is gone while its layer is copied; the copy is removed when it ends`);
    }, (err: Error) => logger.warn({ snapshotId, err: err.message }, `${what}'s lease not renewed; the next renewal tries again`));
  }, renewMs);
  timer.unref();
  try {
    return await copy();
  } finally {
    copying = false;
    clearInterval(timer);
  }
}
