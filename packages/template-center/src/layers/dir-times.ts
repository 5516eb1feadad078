import { lstat, lutimes, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';

/**
 * The times of the directories the layers declare, set once after the last layer (creating a
 * child moves its directory's mtime). They are kept by inode, not by path, and set on the
 * directories found by walking the staging root without following any link: a path recorded
 * earlier may lead elsewhere by the end (a directory `a/etc` recorded, then `a` replaced by a
 * link to `/`, and the host's own /etc was re-timed: found by a helper reading the template
 * center as an attacker). An inode is also a few bytes where a path may be four thousand.
 * A directory whose inode a later layer freed and another directory took gets the first one's
 * time, unless it is declared itself: only a time, and only of what the image holds.
 */
export class DirTimes {
  private readonly times = new Map<bigint, number>();

  record(ino: bigint, mtime: Date): void {
    this.times.set(ino, mtime.getTime());
  }

  /** Sets the recorded times on the directories under `root` (the root itself keeps its own). */
  async apply(root: string): Promise<void> {
    if (this.times.size === 0) return;
    const walk = async (dir: string): Promise<void> => {
      // Dirents say what each entry is without following it: a link is never walked into.
      for (const e of await readdir(dir, { withFileTypes: true })) {
        if (!e.isDirectory()) continue;
        const sub = join(dir, e.name);
        const st = await lstat(sub, { bigint: true });
        if (!st.isDirectory()) continue;
        // Setting a directory's times moves no other directory's, so the order is free.
        const mtime = this.times.get(st.ino);
        if (mtime !== undefined) await lutimes(sub, mtime / 1000, mtime / 1000);
        await walk(sub);
      }
      await yieldToEventLoop();
    };
    await walk(root);
  }
}
