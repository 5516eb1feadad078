import { chown, mkdir, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { ConnectError } from '../connect/code.ts';
import type { User } from './users.ts';

/**
 * Resolves a client path the way E2B's envd does: empty means the default workdir (or home),
 * `~` and `~/x` are the user's home, relative paths are relative to home, absolute paths are
 * taken as given.
 */
export function resolvePath(path: string, user: User, defaultWorkdir: string | undefined): string {
  let p = path === '' ? (defaultWorkdir ?? '') : path;
  if (p.startsWith('~')) {
    if (p.length > 1 && p[1] !== '/') {
      throw new ConnectError('invalid_argument', `cannot expand '${p}': only '~' and '~/...' (the user's own home) are supported`);
    }
    p = join(user.home, p.slice(1));
  }
  if (p.includes('\0')) throw new ConnectError('invalid_argument', 'path contains a NUL byte');
  return isAbsolute(p) ? p : resolve(user.home, p);
}

/** Creates every missing directory down to `path`, owned by the user like E2B's envd does. */
export async function ensureDirs(path: string, uid: number, gid: number): Promise<void> {
  const chain: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    chain.unshift(p);
    if (p === '/') break;
  }
  for (const dir of chain) {
    let info;
    try {
      info = await stat(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (info) {
      if (!info.isDirectory()) throw new ConnectError('invalid_argument', `path is a file: ${dir}`);
      continue;
    }
    try {
      await mkdir(dir, { mode: 0o755 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    await chown(dir, uid, gid);
  }
}
