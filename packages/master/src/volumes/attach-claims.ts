/**
 * Claims on a volume while a sandbox's node attaches it (docs/volumes.md, "Lifecycle and
 * counts"). A create, resume, move or content call reads the volume, then its node attaches it;
 * a DELETE that marked the volume between the two and asked the nodes before the attach would
 * destroy the data under a sandbox that just mounted it. Each attach claims the volume before
 * its node is asked, and ends the claim once the node answered (the node then lists the volume
 * as held, which the DELETE asks about); the DELETE refuses while a claim is under way.
 */
import { conflict, notFound, type Logger, type SvcError } from '@svc/common';
import { VOLUME_CODES } from '@svc/contracts/volumes';
import type { VolumeRepo } from './repo.ts';

/** The least a claim counts, and its default: an attach at the default create timeout (60 s) ends well within it. */
export const MIN_ATTACH_CLAIM_TTL_MS = 15 * 60_000;

/**
 * How long a claim counts at most: longer than any attach. A create's or resume's placement asks
 * up to `nodesAsked` nodes one after another, each within master.create_timeout_insec, which may
 * be set past 300 s; a minute more for the reads around them. A claim that lapsed while its
 * attach was still under way would let a DELETE destroy the data under it. Only the claims of a
 * master that died before ending them run this long, keeping the volume's DELETE refused.
 */
export function attachClaimTtlMs(createTimeoutSec: number, nodesAsked: number): number {
  return Math.max(MIN_ATTACH_CLAIM_TTL_MS, (nodesAsked * createTimeoutSec + 60) * 1000);
}

/**
 * Runs `attach` with each of the volumes claimed, then ends the claims whatever it did. A volume
 * marked deleting (or gone) is a 409 and nothing runs; its claims are ended.
 */
export async function whileAttaching<T>(repo: VolumeRepo, logger: Logger, ttlMs: number, volumeIds: string[], attach: () => Promise<T>): Promise<T> {
  const claimed: string[] = [];
  const release = async () => {
    for (const id of claimed) {
      await repo.releaseAttach(id).catch((err: Error) => {
        // The claim lapses at its time (ttlMs, attachClaimTtlMs); until then the volume's DELETE is refused.
        logger.warn({ volumeId: id, err: err.message }, 'a volume attach claim was not ended; the volume cannot be deleted until it lapses');
      });
    }
  };
  try {
    for (const id of new Set(volumeIds)) {
      const now = Date.now();
      if (!(await repo.claimAttach(id, now, now + ttlMs))) {
        const row = await repo.byId(id);
        throw row ? beingDeleted(row.name) : notFound(`volume ${id} was deleted`);
      }
      claimed.push(id);
    }
  } catch (err) {
    await release();
    throw err;
  }
  try {
    return await attach();
  } finally {
    await release();
  }
}

/** A volume marked deleting: nothing may mount or read it (deletion.ts). */
export function beingDeleted(name: string): SvcError {
  return conflict(`volume ${name} is being deleted (or its delete failed: delete it again); it cannot be mounted or read`);
}

/**
 * The DELETE's answer while attaches are under way. It says when the claims lapse: those of a
 * master that stopped mid-create hold the DELETE that long, and nothing else tells the caller.
 */
export function attachUnderWay(name: string, claimsUntil: number): SvcError {
  return conflict(`volume ${name} is being attached by a sandbox that is starting or resuming, or by a content call; retry the delete once it has started (then kill the sandbox first). The claims lapse at ${new Date(claimsUntil).toISOString()} at the latest, should the master that made them have stopped`, VOLUME_CODES.inUse);
}
