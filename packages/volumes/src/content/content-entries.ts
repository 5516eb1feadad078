/**
 * The file-system steps of the volume content operations (content-ops.ts): an entry's stat in
 * E2B's shape, owner and mode, an upload's copy under its size limit, and removing a tree without
 * following a symlink (every path through confined-fs.ts).
 */
import type { Stats } from 'node:fs';
import { chmod, chown, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { SvcError, badRequest, conflict } from '@svc/common';
import type { VolumeEntryStat } from '@svc/contracts/volumes';
import { ConfinedDir, errnoOf, fdPath } from './confined-fs.ts';

/** Only the permission bits of a mode are applied, as E2B does. */
export const PERM_MASK = 0o777;
/** Directory nesting a recursive remove descends before it is refused (400). */
const MAX_REMOVE_DEPTH = 1024;

export function baseName(vpath: string): string {
  return vpath.slice(vpath.lastIndexOf('/') + 1);
}

export function checkInt(v: unknown, field: string, min: number, max: number): void {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw badRequest(`${field} must be an integer from ${min} to ${max}`);
  }
}

function typeOf(st: Stats): VolumeEntryStat['type'] {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  return 'unknown';
}

/** E2B's VolumeEntryStat: mode is the permission bits (mode & 0o777), times are ISO strings. */
export function entryOf(name: string, path: string, st: Stats, target?: string): VolumeEntryStat {
  const entry: VolumeEntryStat = {
    name,
    path,
    type: typeOf(st),
    size: st.size,
    mode: st.mode & PERM_MASK,
    uid: st.uid,
    gid: st.gid,
    atime: st.atime.toISOString(),
    mtime: st.mtime.toISOString(),
    ctime: st.ctime.toISOString(),
  };
  if (target !== undefined) entry.target = target;
  return entry;
}

export async function describe(dir: ConfinedDir, name: string, vpath: string): Promise<VolumeEntryStat> {
  const st = await dir.lstat(name);
  const target = st.isSymbolicLink() ? await readlinkOrUndefined(dir, name) : undefined;
  return entryOf(name, vpath, st, target);
}

export async function readlinkOrUndefined(dir: ConfinedDir, name: string | Buffer): Promise<string | undefined> {
  try {
    return await dir.readlink(name);
  } catch (err) {
    // Replaced since its lstat: the entry is still described, without a target.
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'EINVAL') return undefined;
    throw err;
  }
}

export async function lstatOrNull(dir: ConfinedDir, name: string): Promise<Stats | null> {
  try {
    return await dir.lstat(name);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return null;
    throw err;
  }
}

/** chown then chmod a directory just made, through an O_PATH descriptor of it; its entry. */
export async function setOwnerAndMode(dir: ConfinedDir, name: string, vpath: string, uid: number, gid: number, mode: number): Promise<VolumeEntryStat> {
  const made = await dir.openDir(name, vpath);
  try {
    await chown(fdPath(made.fd), uid, gid);
    // Again after the umask had its say, and after chown (which clears set-id bits).
    await chmod(fdPath(made.fd), mode);
    return entryOf(name, vpath, await made.stat());
  } finally {
    await made.close();
  }
}

export function requireRegular(st: Stats, vpath: string): void {
  if (st.isFile()) return;
  if (st.isDirectory()) throw badRequest(`failed to read file: "${vpath}" is a directory`);
  if (st.isSymbolicLink()) throw badRequest(`failed to read file: "${vpath}" is a symlink (symlinks are not followed)`);
  throw badRequest(`failed to read file: "${vpath}" is not a regular file`);
}

/** Streams `body` into `file`, at most `maxBytes` bytes (413 beyond). */
export async function copyInto(file: FileHandle, body: Readable | AsyncIterable<Uint8Array>, maxBytes: number, vpath: string): Promise<void> {
  let seen = 0;
  for await (const chunk of body as AsyncIterable<Uint8Array | string>) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    seen += buf.byteLength;
    if (seen > maxBytes) throw new SvcError(413, `the upload to "${vpath}" is larger than ${maxBytes} bytes`);
    let off = 0;
    while (off < buf.byteLength) {
      const { bytesWritten } = await file.write(buf, off, buf.byteLength - off);
      off += bytesWritten;
    }
  }
}

/** Unlinks `name` in `dir` if it is still the file this request created (a failed upload keeps nothing). */
export async function removeOwnFile(dir: ConfinedDir, name: string, file: FileHandle): Promise<void> {
  try {
    const [mine, there] = await Promise.all([file.stat(), dir.lstat(name)]);
    if (mine.ino === there.ino && mine.dev === there.dev) await dir.unlink(name);
  } catch (err) {
    // Gone already (renamed or removed by the sandbox): nothing of ours is left to remove.
    if (errnoOf(err) !== 'ENOENT') throw err;
  }
}

/** What one removal may still do. */
export interface RemoveBudget {
  /** Entries it may still delete (each attempt counts); past them, a 409. */
  entries: number;
  /**
   * Takes a directory nested deeper than MAX_REMOVE_DEPTH out of the walk (moves it where it is
   * removed from the top later). Without it such a tree is a 400: a client removes it in parts,
   * but a volume's Destroy has no client to do that and must finish.
   */
  tooDeep?: (dir: ConfinedDir, name: Buffer) => Promise<void>;
}

/**
 * Removes the entry `name` of `parent`: a directory recursively (never following a symlink:
 * each level is opened with O_NOFOLLOW|O_DIRECTORY through its parent's descriptor), anything
 * else by unlink. `isDir` is a hint (d_type or lstat); a swap since is handled by the errors,
 * a few times, then given up on (409).
 */
export async function removeEntry(parent: ConfinedDir, name: Buffer, isDirHint: boolean, depth: number, budget: RemoveBudget): Promise<void> {
  let isDir = isDirHint;
  for (let swaps = 0; ; swaps++) {
    if (swaps > 8 || --budget.entries < 0) throw conflict('the directory keeps changing while it is removed; nothing more was removed');
    if (!isDir) {
      try {
        await parent.unlink(name);
        return;
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return;
        if (errnoOf(err) !== 'EISDIR') throw err;
        isDir = true; // a directory after all
        continue;
      }
    }
    if (depth >= MAX_REMOVE_DEPTH) {
      if (!budget.tooDeep) throw badRequest(`the directory nests deeper than ${MAX_REMOVE_DEPTH} levels; remove its deeper part first`);
      await budget.tooDeep(parent, name);
      return;
    }
    let dir: ConfinedDir;
    try {
      dir = await parent.openDir(name, '');
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return;
      if (errnoOf(err) !== 'ENOTDIR') throw err;
      isDir = false; // a file or symlink now
      continue;
    }
    try {
      if (await emptyAndRemove(parent, dir, name, depth, budget)) return;
    } finally {
      await dir.close();
    }
    isDir = false; // the name holds something else now
  }
}

/** Empties `dir` (the entry `name` of `parent`) and removes it; false when the name no longer holds a directory. */
async function emptyAndRemove(parent: ConfinedDir, dir: ConfinedDir, name: Buffer, depth: number, budget: RemoveBudget): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    // Batches: what was read is removed, then the directory is read again until it is empty.
    for (let batch = await dir.readEntries(512); batch.length > 0; batch = await dir.readEntries(512)) {
      for (const ent of batch) await removeEntry(dir, ent.name, ent.isDirectory(), depth + 1, budget);
    }
    try {
      await parent.rmdir(name);
      return true;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return true;
      if (errnoOf(err) === 'ENOTDIR') return false;
      // ENOTEMPTY: something was added meanwhile.
      if (errnoOf(err) !== 'ENOTEMPTY' || attempt >= 3) throw err;
    }
  }
}
