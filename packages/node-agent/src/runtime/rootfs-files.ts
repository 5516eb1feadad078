import { lstat, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Writes a file into a sandbox root on the host without following any symlink the image
 * holds: an image's `/etc -> /host/path` must not make the agent write outside the sandbox.
 * Returns false (and writes nothing) when a symlink is in the way.
 */
export async function writeIntoRootfs(root: string, sandboxPath: string, content: string): Promise<boolean> {
  const target = await placeIn(root, sandboxPath);
  if (!target) return false;
  await writeFile(target, content, { flag: 'wx', mode: 0o644 });
  return true;
}

/** Makes `sandboxPath` a symlink to `linkTarget` (a path inside the sandbox), on the same terms. */
export async function linkIntoRootfs(root: string, sandboxPath: string, linkTarget: string): Promise<boolean> {
  const target = await placeIn(root, sandboxPath);
  if (!target) return false;
  await symlink(linkTarget, target);
  return true;
}

/** The host path for `sandboxPath`, its parents made and whatever file was there removed; undefined when a symlink or directory is in the way. */
async function placeIn(root: string, sandboxPath: string): Promise<string | undefined> {
  const parts = sandboxPath.split('/').filter(Boolean);
  let dir = root;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) await mkdir(dir, { mode: 0o755 });
    else if (!st.isDirectory()) return undefined;
  }
  const target = join(dir, parts[parts.length - 1]);
  const st = await lstat(target).catch(() => undefined);
  if (st?.isDirectory()) return undefined;
  if (st) await rm(target);
  return target;
}
