/**
 * Confined file system access under one root directory (a volume's host mount), for a server
 * that runs as root over contents written by untrusted sandboxes.
 *
 * The threat: a sandbox plants symlinks (`a -> /etc`) and races (swaps a directory for a symlink
 * between a check and a use). The defence: no path under the root is ever resolved by the kernel
 * from a string as a whole. A path is walked one component at a time from a descriptor of the
 * root: each step opens `/proc/self/fd/<parent>/<component>` with O_NOFOLLOW (and O_DIRECTORY),
 * so the kernel starts from the directory the parent descriptor really references (the magic
 * link, not a name that may have been swapped since), and a symlink in any component fails the
 * open instead of being followed. The final component is then acted on through the same
 * `/proc/self/fd/<parent>/<name>` form with calls that do not follow a final symlink (lstat,
 * unlink, rmdir, mkdir, rename, readlink, open with O_NOFOLLOW), or through a descriptor of the
 * node itself (`/proc/self/fd/<node>` for chmod and chown of an O_PATH descriptor).
 *
 * Directories are held by O_PATH descriptors: opening one never reads it and never has a side
 * effect, and a FIFO or device can never be opened by the walk (O_DIRECTORY refuses them).
 * Node has no openat(2); the /proc form is its equivalent and needs procfs mounted (Linux only).
 *
 * Paths from clients are volume-absolute or relative; `normalizeVolumePath` cleans them
 * lexically, as Go's filepath.Clean("/" + path) does in E2B's implementation: `..` never climbs
 * above the root (`/../etc` is `/etc` inside the volume).
 */
import { constants as C, type Dirent, type Stats } from 'node:fs';
import { lstat, mkdir, open, opendir, readlink, rename, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { badRequest } from '@svc/common';

/** Linux O_PATH (the same value on x86-64 and arm64); node's fs.constants lacks it. */
const O_PATH = 0o10000000;
/** Longest path accepted from a client, in bytes (Linux PATH_MAX). */
export const MAX_PATH_BYTES = 4096;

const DIR_FLAGS = O_PATH | C.O_DIRECTORY | C.O_NOFOLLOW;
const NODE_FLAGS = O_PATH | C.O_NOFOLLOW;

/**
 * A client's path as a volume-absolute path: '/' is the root, no empty, '.' or '..' parts, no
 * trailing slash. `..` is resolved lexically and clamped at the root. Throws 400 for a missing or
 * empty path, a NUL byte, or more than MAX_PATH_BYTES bytes.
 */
export function normalizeVolumePath(input: unknown): string {
  if (typeof input !== 'string' || input === '') throw badRequest('path is required');
  if (input.includes('\0')) throw badRequest('path must not contain NUL bytes');
  if (Buffer.byteLength(input) > MAX_PATH_BYTES) throw badRequest(`path is longer than ${MAX_PATH_BYTES} bytes`);
  const parts: string[] = [];
  for (const part of input.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/** The components of a normalized volume path ('/' has none). */
export function pathComponents(volumePath: string): string[] {
  return volumePath === '/' ? [] : volumePath.slice(1).split('/');
}

/** A child's volume path. */
export function childPath(parent: string, name: string): string {
  return parent === '/' ? `/${name}` : `${parent}/${name}`;
}

/** Throws unless `name` is one plain component (defence in depth: callers pass normalized parts). */
function checkComponent(name: string | Buffer): void {
  const s = typeof name === 'string' ? name : name.toString('latin1');
  if (s === '' || s === '.' || s === '..' || s.includes('/') || s.includes('\0')) {
    throw new Error(`confined-fs: not a single path component: ${JSON.stringify(s)}`);
  }
}

/** `/proc/self/fd/<fd>`: the node a descriptor references. */
export function fdPath(fd: number): string {
  return `/proc/self/fd/${fd}`;
}

/**
 * A directory under the root, held by an O_PATH descriptor. Every operation on an entry goes
 * through `/proc/self/fd/<fd>/<name>` and never follows a symlink in `name`.
 */
export class ConfinedDir {
  private closed = false;

  private constructor(private readonly handle: FileHandle, readonly volumePath: string) {}

  /**
   * Opens the root. The root path itself is trusted (it comes from the server, not a client),
   * but its last component must be a real directory, not a symlink.
   */
  static async openRoot(root: string): Promise<ConfinedDir> {
    return new ConfinedDir(await open(root, DIR_FLAGS), '/');
  }

  get fd(): number {
    return this.handle.fd;
  }

  /** `/proc/self/fd/<fd>/<name>` for the entry `name` (one component) of this directory. */
  at(name: string): string;
  at(name: Buffer): Buffer;
  at(name: string | Buffer): string | Buffer {
    checkComponent(name);
    const prefix = `${fdPath(this.handle.fd)}/`;
    return typeof name === 'string' ? prefix + name : Buffer.concat([Buffer.from(prefix), name]);
  }

  /** The child directory `name`; ENOTDIR when it is a symlink or anything but a directory. */
  async openDir(name: string | Buffer, volumePath: string): Promise<ConfinedDir> {
    return new ConfinedDir(await open(this.atAny(name), DIR_FLAGS), volumePath);
  }

  /**
   * An O_PATH descriptor of the entry `name` itself (a symlink is not followed): fstat it, and
   * chmod or chown it through fdPath(). Opening it never blocks and has no side effect.
   */
  async openNode(name: string): Promise<FileHandle> {
    return open(this.at(name), NODE_FLAGS);
  }

  /** Opens the entry `name` for I/O; O_NOFOLLOW is always added. */
  async openFile(name: string, flags: number, mode?: number): Promise<FileHandle> {
    return open(this.at(name), flags | C.O_NOFOLLOW, mode);
  }

  /** The directory's own stat. */
  async stat(): Promise<Stats> {
    return this.handle.stat();
  }

  lstat(name: string | Buffer): Promise<Stats> {
    return lstat(this.atAny(name));
  }

  readlink(name: string | Buffer): Promise<string> {
    return readlink(this.atAny(name), 'utf8');
  }

  async mkdir(name: string, mode: number): Promise<void> {
    await mkdir(this.at(name), mode);
  }

  unlink(name: string | Buffer): Promise<void> {
    return unlink(this.atAny(name));
  }

  rmdir(name: string | Buffer): Promise<void> {
    return rmdir(this.atAny(name));
  }

  /** Renames within this directory; a symlink at either name is moved or replaced, never followed. */
  rename(from: string, to: string): Promise<void> {
    return rename(this.at(from), this.at(to));
  }

  /**
   * Up to `max` entries of this directory, names as bytes (a name need not be UTF-8), with
   * their d_type. The directory is opened anew through the descriptor; the listing holds no
   * descriptor after it returns.
   */
  async readEntries(max: number): Promise<Dirent<Buffer>[]> {
    // Node supports the 'buffer' encoding here; @types/node 20 does not say so.
    const encoding = 'buffer' as unknown as BufferEncoding;
    const dir = await opendir(fdPath(this.handle.fd), { encoding, bufferSize: Math.min(Math.max(max, 1), 1024) });
    const out: Dirent<Buffer>[] = [];
    try {
      for (let d = await dir.read(); d !== null && out.length < max; d = await dir.read()) out.push(d as unknown as Dirent<Buffer>);
    } finally {
      await dir.close();
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }

  private atAny(name: string | Buffer): string | Buffer {
    return typeof name === 'string' ? this.at(name) : this.at(name);
  }
}

/** A step of a walk, reported to a hook (tests use it to race the walker). */
export interface WalkStep {
  /** The volume path of the directory just opened. */
  path: string;
}

export interface WalkOptions {
  /**
   * Called for a missing component (ENOENT): creates the directory `name` in `dir` (or throws).
   * Without it a missing component fails with ENOENT.
   */
  createMissing?: (dir: ConfinedDir, name: string) => Promise<void>;
  /** Called after each directory of the walk is opened, before the next step. */
  onStep?: (step: WalkStep) => void | Promise<void>;
}

/**
 * Opens the directory at `components` (relative to `root`, which stays open and owned by the
 * caller), one component at a time with O_NOFOLLOW|O_DIRECTORY. Each intermediate descriptor is
 * closed once the next is open. Errors are the kernel's: ENOENT (missing), ENOTDIR (a symlink
 * or a non-directory on the way). The returned directory belongs to the caller; when
 * `components` is empty it is `root` itself (do not close it twice: compare with `root`).
 */
export async function walkDirs(root: ConfinedDir, components: readonly string[], opts: WalkOptions = {}): Promise<ConfinedDir> {
  let cur = root;
  try {
    for (const name of components) {
      const path = childPath(cur.volumePath, name);
      let next: ConfinedDir;
      try {
        next = await cur.openDir(name, path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || !opts.createMissing) throw err;
        await opts.createMissing(cur, name);
        next = await cur.openDir(name, path);
      }
      if (cur !== root) await cur.close();
      cur = next;
      await opts.onStep?.({ path });
    }
    return cur;
  } catch (err) {
    if (cur !== root) await cur.close();
    throw err;
  }
}

/** The kernel's error code of a failed call, if any. */
export function errnoOf(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}
