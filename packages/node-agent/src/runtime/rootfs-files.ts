import { existsSync } from 'node:fs';
import { chmod, lstat, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@svc/common';
import { SANDBOX_SUDO } from './runtime-bundle.ts';

/**
 * Writes a file into a sandbox root on the host without following any symlink the image
 * holds: an image's `/etc -> /host/path` must not make the agent write outside the sandbox.
 * Returns false (and writes nothing) when a directory is in the file's place.
 */
async function writeIntoRootfs(root: string, sandboxPath: string, content: string, logger: Logger): Promise<boolean> {
  const target = await placeIn(root, sandboxPath, logger);
  if (!target) return false;
  await writeFile(target, content, { flag: 'wx', mode: 0o644 });
  return true;
}

/** Makes `sandboxPath` a symlink to `linkTarget` (a path inside the sandbox), on the same terms. */
async function linkIntoRootfs(root: string, sandboxPath: string, linkTarget: string, logger: Logger): Promise<boolean> {
  const target = await placeIn(root, sandboxPath, logger);
  if (!target) return false;
  await symlink(linkTarget, target);
  return true;
}

/**
 * The host path for `sandboxPath`, its parents made and whatever file was there removed;
 * undefined when a directory is in the file's place. A parent that is a symlink or a file is
 * removed (never followed) and made a real directory: skipping the file instead let a tenant
 * whose snapshot holds `/etc -> /etc2` keep the platform's /etc/ld.so.preload from being written,
 * so that at the next boot their own preload loaded into dumb-init and envd (found by a helper
 * reading the node agent as an attacker).
 */
async function placeIn(root: string, sandboxPath: string, logger: Logger): Promise<string | undefined> {
  const parts = sandboxPath.split('/').filter(Boolean);
  let dir = root;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    const st = await lstat(dir).catch(() => { /* not there: made just below (which reports any other failure) */ return undefined; });
    if (st?.isDirectory()) continue;
    if (st) {
      logger.warn({ path: sandboxPath, parent: dir.slice(root.length), was: st.isSymbolicLink() ? 'symlink' : 'file' }, 'image holds a parent of a platform file as a symlink or file; replaced by a directory');
      await rm(dir);
    }
    await mkdir(dir, { mode: 0o755 });
  }
  const target = join(dir, parts[parts.length - 1]);
  const st = await lstat(target).catch(() => { /* not there: written fresh below */ return undefined; });
  if (st?.isDirectory()) return undefined;
  if (st) await rm(target);
  return target;
}

/**
 * What every sandbox root gets at boot, on either runtime: `files` (resolv.conf, hostname, ...)
 * and svc's sudo in the image's sudo's place (it goes through envd: docs/decisions.md). A path
 * an image holds as a directory is left alone and logged; a parent it holds as a symlink or file
 * is made a directory (placeIn).
 */
export async function placeSandboxFiles(root: string, files: Record<string, string>, logger: Logger): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    if (!(await writeIntoRootfs(root, path, content, logger))) logger.warn({ path }, 'image holds a directory there; file not placed');
  }
  const sudoPath = existsSync(join(root, 'usr/bin/sudo')) ? '/usr/bin/sudo' : '/usr/local/bin/sudo';
  if (!(await linkIntoRootfs(root, sudoPath, SANDBOX_SUDO, logger))) logger.warn({ path: sudoPath }, 'image holds a directory there; sudo not placed');
}

/**
 * Whether the sandbox root's /tmp is a real directory the runtime may mount on the sandbox's
 * disk (oci-spec.ts): made when the image has none, and sticky and writable by all (1777) as
 * the tmpfs it replaces was, whatever mode the image gave it. An image's
 * /tmp that is a symlink or a file is left alone (false): following it on the host could bind
 * a host directory into the sandbox.
 */
export async function ensureTmpDir(root: string, logger: Logger): Promise<boolean> {
  const tmp = join(root, 'tmp');
  const st = await lstat(tmp).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (st?.isDirectory()) {
    if ((st.mode & 0o7777) !== 0o1777) await chmod(tmp, 0o1777);
    return true;
  }
  if (st) {
    logger.warn({ path: '/tmp' }, 'image holds /tmp as a symlink or file; /tmp is not put on the sandbox disk');
    return false;
  }
  await mkdir(tmp);
  await chmod(tmp, 0o1777);
  return true;
}
