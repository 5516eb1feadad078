import { constants } from 'node:fs';
import { chmod, copyFile, lchown, link, lstat, mkdir, readdir, readlink, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { UnpackBudget } from '../layers/unpack-budget.ts';

const LABEL = '/etc/skel';

export interface SkelCopyOptions {
  uid: number;
  gid: number;
  /** The build's unpack budget: every entry copied and every byte counts, as the layers' did. */
  budget: UnpackBudget;
  signal?: AbortSignal;
}

/**
 * Copies an image's /etc/skel into a new home directory, as `useradd -m` does, owned by the new
 * user: directories, regular files and symbolic links (verbatim); anything else is left out (a
 * FIFO would wait for a writer forever, a device node is no file to copy). Hard links stay hard
 * links: copied each as a file of its own, 200 links to one 5 MiB file in a 5 MiB layer took a
 * gigabyte, and the synchronous copy held the template center's only thread for as long (found
 * by a helper reading the template center as an attacker). Everything is charged to the build's
 * unpack budget, and the copy is asynchronous. `skel` and `home` are host paths already resolved
 * inside the staging root; links are never followed, and `home` itself is not copied into
 * itself when /etc/skel holds it.
 */
export async function copySkel(skel: string, home: string, o: SkelCopyOptions): Promise<void> {
  /** The first copy of each inode that has several names, by its source inode. */
  const copies = new Map<bigint, string>();
  const copyDir = async (from: string, to: string): Promise<void> => {
    for (const name of await readdir(from)) {
      o.signal?.throwIfAborted();
      const src = join(from, name);
      if (src === home) continue;
      const dest = join(to, name);
      const st = await lstat(src, { bigint: true });
      if (!st.isDirectory() && !st.isFile() && !st.isSymbolicLink()) continue;
      o.budget.takeEntry(LABEL);
      if (st.isDirectory()) {
        await mkdir(dest, { mode: 0o700 });
        await copyDir(src, dest);
        await chmod(dest, Number(st.mode & 0o7777n));
      } else if (st.isSymbolicLink()) {
        await symlink(await readlink(src), dest);
      } else {
        const first = st.nlink > 1n ? copies.get(st.ino) : undefined;
        if (first) {
          await link(first, dest);
          continue; // one inode: owned already, and its bytes counted once
        }
        o.budget.takeBytes(Number(st.size), LABEL);
        // EXCL: a name that appeared meanwhile is an error, never a file written through.
        await copyFile(src, dest, constants.COPYFILE_EXCL);
        if (st.nlink > 1n) copies.set(st.ino, dest);
      }
      // After the copy: chown clears the set-id bits, so a set-uid file of the image's skel
      // does not become one of the user's.
      await lchown(dest, o.uid, o.gid);
    }
  };
  await copyDir(skel, home);
}
