/**
 * The local plugin's data root, `<root>`, and what happens to a volume's data in it outside the
 * hooks' mounts: the root kept root's alone, and a volume's data deleted without following a link.
 *
 * A volume's data directory is written by sandboxes (as root on microvm), and Destroy runs as
 * root. A recursive delete by path (`rm -rf`, fs.rm) follows a directory that a sandbox still
 * holding the volume swaps for a symlink mid-walk, and deletes files of the same names wherever
 * the link points, anywhere on the host. So Destroy first renames the data directory to a tomb
 * name in the root (atomic, one filesystem; the root is 0700, so no sandbox and no user of the
 * host reaches the tomb by path), then removes the tomb through descriptors, one level at a time
 * with O_NOFOLLOW (content/confined-fs.ts): a link is unlinked, never followed.
 */
import { opendir, realpath, rename } from 'node:fs/promises';
import { makeDirPrivate, systemDirectory, type PrivateDirResult } from '@svc/common';
import { ConfinedDir, errnoOf } from '../content/confined-fs.ts';
import { removeEntry, type RemoveBudget } from '../content/content-entries.ts';

/** Entries one Destroy deletes before it gives up (409; a Destroy again goes on from there). */
const MAX_DESTROY_ENTRIES = 50_000_000;
/**
 * Tombs begin with a dot: a volume id is [a-zA-Z0-9_-] only, so a tomb is never a volume's
 * directory, and a Destroy again finds what an earlier one left.
 */
const TOMB_PREFIX = '.destroying-';

/**
 * Makes the root (0700), or makes an existing one 0700: `mkdir`'s mode applies only to a
 * directory it creates, and a root made by an operator, an NFS export or an older install may be
 * 0755, through which any user of the host reaches the volumes' 0777 directories. An existing
 * directory shared by design (sticky or world-writable, /tmp-like) or another user's is left as
 * it is (config-dirs.ts says why), and the system's own directories are refused outright. Answers
 * what it changed or left, for the caller's log; a chmod refused (root-squashed NFS) is answered
 * too, not thrown: the volumes still work, and the operator is told.
 */
export async function prepareDataRoot(root: string): Promise<PrivateDirResult> {
  const system = systemDirectory(root);
  if (system !== undefined) throw new Error(`the local volume data root ${root} is the system directory ${system}: choose a directory of its own (SVC_LOCAL_VOLUME_ROOT)`);
  return makeDirPrivate(root);
}

/**
 * Deletes `<root>/<volumeId>` and whatever an earlier, interrupted call left of it; a volume
 * without data is success. Never follows a symlink in the data, and never deletes outside it.
 */
export async function removeVolumeData(root: string, volumeId: string): Promise<void> {
  let dir: ConfinedDir;
  try {
    // The root is the operator's (it may be a link to a mount); only what lies inside it is not trusted.
    dir = await ConfinedDir.openRoot(await realpath(root));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return; // no root: no volume has data here
    throw err;
  }
  try {
    const tomb = `${TOMB_PREFIX}${volumeId}`;
    const queue = await leftTombs(root, tomb);
    // Numbered past every tomb an earlier Destroy left: a name still queued is never renamed onto.
    let moved = Math.max(0, ...queue.map((n) => Number(n.slice(tomb.length + 1)) || 0));
    const budget: RemoveBudget = {
      entries: MAX_DESTROY_ENTRIES,
      // A tree nested deeper than the walk descends is cut there and removed from the top.
      tooDeep: async (parent, name) => {
        const next = `${tomb}.${++moved}`;
        await renameInto(parent, name, dir, next);
        queue.push(next);
      },
    };
    // What an earlier Destroy left first: the rename below needs the tomb's name free.
    await drain(dir, queue, budget);
    try {
      await dir.rename(volumeId, tomb);
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
      return; // no data (any more): a repeated Destroy
    }
    queue.push(tomb);
    await drain(dir, queue, budget);
  } finally {
    await dir.close();
  }
}

async function drain(dir: ConfinedDir, queue: string[], budget: RemoveBudget): Promise<void> {
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    await removeEntry(dir, Buffer.from(name), true, 0, budget);
  }
}

/** Tombs of this volume an earlier Destroy left in the root (it failed or was killed midway). */
async function leftTombs(root: string, tomb: string): Promise<string[]> {
  const out: string[] = [];
  // The root is ours (0700), and only names are read from it here.
  for await (const entry of await opendir(root)) {
    if (entry.name === tomb || entry.name.startsWith(`${tomb}.`)) out.push(entry.name);
  }
  return out;
}

/** Moves the entry `name` of `from` to `to`/`newName`; a link is moved as the link. */
async function renameInto(from: ConfinedDir, name: Buffer, to: ConfinedDir, newName: string): Promise<void> {
  await rename(from.at(name), to.at(newName));
}
