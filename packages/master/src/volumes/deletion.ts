/**
 * DELETE of a volume (docs/volumes.md, "Lifecycle and counts"). The volume is marked deleting
 * before anything else, so that no create, resume or content call hands it out from then on (a
 * sandbox that mounted it while the plugin's Destroy ran held data being deleted, and could swap
 * a directory in it for a symlink under the plugin's walk). Then whether an attach that read it
 * before the mark is under way (attach-claims.ts), and whether any node holds it (409 for either,
 * and the mark is taken back: nothing was destroyed), then the plugin's Destroy
 * runs, then the record goes. A Destroy that fails leaves the volume marked: unusable, and a
 * DELETE again finishes it. One DELETE of a volume at a time, across masters.
 */
import { conflict, notFound, SvcError, withLock, type Coordination, type Logger } from '@svc/common';
import { VOLUME_CODES } from '@svc/contracts/volumes';
import { attachesUnderWay, type VolumeDbRow, type VolumeRepo } from './repo.ts';
import type { ControllerPlugins, VolumeNodes } from './ports.ts';
import { refuseWhileHeld } from './holders.ts';
import { attachUnderWay } from './attach-claims.ts';
import { pluginFailure } from './plugin-failure.ts';

/** A DELETE's hold on its volume; renewed while it runs (a Destroy may take the plugin's whole timeout and more). */
const DELETE_LOCK_TTL_MS = 30_000;

export interface DeletionDeps {
  repo: VolumeRepo;
  plugins: ControllerPlugins;
  nodes: VolumeNodes;
  logger: Logger;
  coordination: Coordination;
  /** This master's name as a lock holder. */
  holder: string;
}

/** Deletes the volume `found` names; the caller found it in the caller's team. */
export async function deleteVolume(d: DeletionDeps, found: VolumeDbRow): Promise<void> {
  const got = await withLock(d.coordination, `volume-delete:${found.volume_id}`, d.holder, DELETE_LOCK_TTL_MS, () => deleteLocked(d, found.volume_id));
  if (!got.acquired) throw conflict(`volume ${found.name} is being deleted by another request; retry shortly`);
}

async function deleteLocked(d: DeletionDeps, volumeId: string): Promise<void> {
  // Read again under the lock: the request that held it before may have deleted it, or failed.
  const row = await d.repo.byId(volumeId);
  if (!row) throw notFound(`volume ${volumeId} not found`);
  const volume = { volumeId, name: row.name, teamId: row.team_id };
  const again = row.deleting_at !== null;
  const at = row.deleting_at ?? Date.now();
  if (!again && !(await d.repo.markDeleting(volumeId, at))) throw conflict(`volume ${row.name} is being deleted by another request; retry shortly`);
  try {
    // Read after the mark: every attach that claimed the volume before it shows here, and none
    // can claim it after (attach-claims.ts). One that has not heard its node yet may attach
    // after the nodes below are asked.
    const marked = await d.repo.byId(volumeId);
    if (marked && attachesUnderWay(marked, Date.now())) throw attachUnderWay(row.name, Number(marked.attach_claims_until));
    await refuseWhileHeld(d.nodes, volume);
  } catch (err) {
    // Nothing was destroyed: a volume that was usable is usable again. One whose Destroy failed
    // before stays marked (its data may be half gone).
    if (!again) {
      await d.repo.unmarkDeleting(volumeId, at).catch((e: Error) => {
        d.logger.error({ volumeId, err: e.message }, 'a refused volume delete could not take back its mark; the volume stays unusable until it is deleted');
      });
    }
    throw err;
  }
  // No node holds it, whatever the count says (a lost answer): the nodes decide. A sandbox that
  // attaches it from here on moves the count again, and the guarded delete below sees that.
  if (Number(row.refcount) !== 0) await d.repo.setRefcount(volumeId, 0);
  try {
    await d.plugins.controller(row.driver).destroy({ volumeId });
  } catch (err) {
    const e = pluginFailure(d.logger, row.driver, 'destroy', volume, err as Error);
    throw new SvcError(e.status, `${e.message}. The volume stays, marked as being deleted (no sandbox mounts it, no content call reads it): delete it again to retry`);
  }
  if (!(await d.repo.deleteUnmounted(volumeId))) {
    // A flip counted after the nodes were asked: an attach whose claim lapsed before its node
    // answered (attach-claims.ts). The local plugin's Destroy follows no link it finds in the data (docs/volume-plugins.md).
    d.logger.error({ volumeId }, 'a volume was attached while it was being destroyed; its record stays, marked, and its data may be gone');
    throw conflict(`volume ${row.name} was attached by a sandbox started while it was being deleted; its data may be gone. Kill that sandbox, then delete the volume again`, VOLUME_CODES.inUse);
  }
  d.logger.info({ volumeId, name: row.name, driver: row.driver, retried: again }, 'volume destroyed');
}
