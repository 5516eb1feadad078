import { lstat, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Writes a file into a sandbox root on the host without following any symlink the image
 * holds: an image's `/etc -> /host/path` must not make the agent write outside the sandbox.
 * Returns false (and writes nothing) when a symlink is in the way.
 */
export async function writeIntoRootfs(root: string, sandboxPath: string, content: string): Promise<boolean> {
  const parts = sandboxPath.split('/').filter(Boolean);
  let dir = root;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) await mkdir(dir, { mode: 0o755 });
    else if (!st.isDirectory()) return false;
  }
  const target = join(dir, parts[parts.length - 1]);
  const st = await lstat(target).catch(() => undefined);
  if (st?.isDirectory()) return false;
  if (st) await rm(target);
  await writeFile(target, content, { flag: 'wx', mode: 0o644 });
  return true;
}
