import { lstatSync, readdirSync } from 'node:fs';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { join } from 'node:path';

export interface TreeSize {
  /** Bytes of file data rounded up to 4 KiB blocks, hard links counted once. */
  dataBytes: number;
  inodes: number;
}

const BLOCK = 4096;

/** Measures a staging tree the way ext4 will need to hold it (synchronous per directory, for speed). */
export async function measureTree(root: string): Promise<TreeSize> {
  const seen = new Set<number>();
  let dataBytes = 0;
  let inodes = 0;
  const walk = async (dir: string): Promise<void> => {
    const subdirs: string[] = [];
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const st = lstatSync(path);
      if (st.nlink > 1 && !st.isDirectory()) {
        if (seen.has(st.ino)) continue;
        seen.add(st.ino);
      }
      inodes++;
      if (st.isDirectory()) {
        dataBytes += BLOCK;
        subdirs.push(path);
      } else if (st.isFile() || (st.isSymbolicLink() && st.size > 59)) {
        dataBytes += Math.ceil(st.size / BLOCK) * BLOCK;
      }
    }
    await yieldToEventLoop();
    for (const sub of subdirs) await walk(sub);
  };
  await walk(root);
  return { dataBytes, inodes: inodes + 1 };
}
