import { readFile } from 'node:fs/promises';
import { run } from './exec.ts';

/** Every mount point of this mount namespace, innermost last. */
export async function listMountPoints(): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[4].replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8))));
}

export async function isMountPoint(path: string): Promise<boolean> {
  return (await listMountPoints()).includes(path);
}

/** Unmounts, falling back to a lazy unmount when something still holds the mount. */
export async function unmount(path: string): Promise<void> {
  const r = await run('umount', [path], { allowFail: true });
  if (r.code === 0 || !(await isMountPoint(path))) return;
  await run('umount', ['-l', path]);
}
