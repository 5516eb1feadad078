/**
 * The directory an upload goes into, made ready as its user could have made it: envd runs as
 * root, so without these checks a user's symlink (`~/d -> /etc`) would have root create and
 * chown directories wherever it points.
 */
import { constants as fsConstants, type Stats } from 'node:fs';
import { mkdir, open, realpath, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { whenMissing } from '@svc/common/missing';
import { ConnectError } from '../connect/code.ts';
import { checkOpenedAt } from './fd-location.ts';
import { MAY_SEARCH, MAY_WRITE, permits, type Caller } from './user-access.ts';

export interface CheckedDir {
  /** The directory's real path (no symlink in it). */
  path: string;
  stat: Stats;
}

const OPEN_NEW_DIR = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW;

/**
 * Walks `path` from `/` as the kernel would for `who`: each component followed (symlinks
 * resolved) and searchable by `who`; each missing one created only where `who` may write, owned
 * by `who` (E2B's envd makes upload directories the user's too). Returns the real directory.
 */
export async function directoryFor(path: string, who: Caller): Promise<CheckedDir> {
  let dir: CheckedDir = { path: '/', stat: await stat('/') };
  for (const name of resolve(path).split('/').filter(Boolean)) {
    if (!permits(dir.stat, who, MAY_SEARCH)) throw denied(who, `enter ${dir.path}`);
    dir = await nextDir(dir, name, who);
  }
  if (!permits(dir.stat, who, MAY_SEARCH)) throw denied(who, `enter ${dir.path}`);
  return dir;
}

/**
 * Directories this envd is creating (real path → the creation, chown included). Between mkdir and
 * chown a new directory is root's, 0755: a concurrent upload into it (the SDK's files.write([...])
 * sends one request per file at once) that took it as found then would be refused to write in
 * it. It waits for the creation instead.
 */
const creating = new Map<string, Promise<CheckedDir>>();

async function nextDir(parent: CheckedDir, name: string, who: Caller): Promise<CheckedDir> {
  const path = join(parent.path, name);
  const found = await existingDir(path);
  // Looked up after existingDir: a creation whose directory it saw was registered before its
  // mkdir completed, and stays registered until its chown is done.
  const pending = creating.get(path);
  if (pending) {
    await pending.catch(() => {
      // Its own upload reports that failure; this one looks again at what is there now.
    });
    return nextDir(parent, name, who);
  }
  if (found) return found;
  const creation = createDir(parent, name, who);
  creating.set(path, creation);
  try {
    return await creation;
  } finally {
    creating.delete(path);
  }
}

async function existingDir(path: string): Promise<CheckedDir | undefined> {
  const real = await realpath(path).catch(whenMissing(undefined));
  if (real === undefined) return undefined;
  const info = await stat(real);
  if (!info.isDirectory()) throw new ConnectError('invalid_argument', `path is a file: ${path}`);
  return { path: real, stat: info };
}

async function createDir(parent: CheckedDir, name: string, who: Caller): Promise<CheckedDir> {
  if (!permits(parent.stat, who, MAY_WRITE | MAY_SEARCH)) throw denied(who, `create directories in ${parent.path}`);
  const path = join(parent.path, name);
  try {
    await mkdir(path, { mode: 0o755 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // Made meanwhile by something other than envd (envd's own creations are waited for, in
    // nextDir): taken as found. A symlink to nothing is in the way.
    const found = await existingDir(path);
    if (!found) throw new ConnectError('invalid_argument', `path is a symbolic link to nothing: ${path}`);
    return found;
  }
  // Owned through a descriptor checked to be the new directory: chown(path) would follow a
  // symlink put in its place.
  const handle = await open(path, OPEN_NEW_DIR);
  try {
    await checkOpenedAt(handle, path);
    await handle.chown(who.uid, who.gid);
    return { path, stat: await handle.stat() };
  } finally {
    await handle.close();
  }
}

export function denied(who: Caller, what: string): ConnectError {
  return new ConnectError('permission_denied', `user '${who.name}' may not ${what}`);
}
