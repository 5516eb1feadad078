import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Mounts an ext4 image read-only on a loop device; unmount() detaches it. */
export function mountReadOnly(image: string): { dir: string; unmount(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tc-mnt-'));
  const r = spawnSync('mount', ['-t', 'ext4', '-o', 'loop,ro,noload', image, dir], { encoding: 'utf8' });
  if (r.status !== 0) {
    rmdirSync(dir);
    throw new Error(`mount ${image}: ${r.stderr}`);
  }
  return {
    dir,
    unmount: () => {
      spawnSync('umount', [dir]);
      rmdirSync(dir);
    },
  };
}
