/**
 * The volume content operations (E2B's /volumecontent API, the server side of the official SDK's
 * `Volume.list`, `makeDir`, `getInfo`/`exists`, `updateMetadata`, `readFile`, `writeFile`,
 * `remove`) on a directory of the host, with E2B's semantics and statuses
 * (orchestrator/pkg/volumes in e2b-dev/infra) except where following a symlink would be needed:
 * every path is resolved by confined-fs.ts, which never follows one.
 *
 * Statuses: 404 a missing path; 409 the path exists (makeDir and writeFile without force, or
 * in the way: a directory where a file is written); 400 an invalid request, a component of the
 * path that is a file (E2B's ENOTDIR answer) or a symlink, a symlink or special file where a
 * regular file or directory is needed, deleting the root, a depth out of range or a listing
 * over its limit; 413 an upload over its limit; 507 the volume is full.
 *
 * Where E2B (which runs in a chroot of the volume) follows symlinks inside the volume, this
 * never does: a symlink is reported as type 'symlink' with its raw `target`, a path through a
 * symlink is a 400, a write over a symlink replaces the link, removing one removes the link, and
 * its mode cannot be changed.
 */
import { randomBytes } from 'node:crypto';
import { constants as C, type Stats } from 'node:fs';
import { chmod, chown, type FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { badRequest, conflict } from '@svc/common';
import type { VolumeEntryStat } from '@svc/contracts/volumes';
import { ConfinedDir, childPath, errnoOf, fdPath, normalizeVolumePath, pathComponents, walkDirs, type WalkStep } from './confined-fs.ts';
import {
  baseName, checkInt, copyInto, describe, entryOf, lstatOrNull, PERM_MASK, readlinkOrUndefined, removeEntry, removeOwnFile, requireRegular, setOwnerAndMode,
} from './content-entries.ts';
import { explain } from './content-errors.ts';

/** E2B's defaults (orchestrator/pkg/volumes/service.go). */
export const VOLUME_CONTENT_DEFAULTS = {
  uid: 9090,
  gid: 9090,
  dirMode: 0o777,
  fileMode: 0o666,
} as const;

/** E2B's depth range for a listing (depth 0 is taken as 1). */
export const LIST_DEPTH = { min: 1, max: 10 } as const;
/** Entries one listing may return before it is refused (400). */
const DEFAULT_MAX_LIST_ENTRIES = 10_000;
/** Entries one remove may delete before it gives up (409: the tree keeps growing). */
const MAX_REMOVE_ENTRIES = 10_000_000;
/** Largest uid or gid (uint32; 2^32-1 is chown's "unchanged"). */
export const MAX_ID = 0xffff_ffff;
/** Largest mode accepted; only the permission bits (0o777) are applied, as E2B does. */
export const MAX_MODE = 0o7777;

const UPLOAD_PREFIX = '.svc-upload-';

export interface CreateOptions {
  uid?: number;
  gid?: number;
  mode?: number;
  /** makeDir: create missing parents, and an existing directory is no error. writeFile: also replace an existing file. */
  force?: boolean;
}

export interface WriteOptions extends CreateOptions {
  /** Bytes the body may have; more is a 413 and nothing is kept. */
  maxBytes?: number;
}

export interface MetadataUpdate {
  uid?: number;
  gid?: number;
  mode?: number;
}

export interface VolumeContentOptions {
  /** Owner of what is created without a uid/gid (E2B: 9090). */
  defaultUid?: number;
  defaultGid?: number;
  /** Entries a listing may return (default DEFAULT_MAX_LIST_ENTRIES). */
  maxListEntries?: number;
  /** Test hook: called after each directory a walk opens, and before a final component is opened. */
  onStep?: (step: WalkStep & { stage: 'dir' | 'final' }) => void | Promise<void>;
}

/**
 * An open file to send: `stream` owns the descriptor and closes it when it ends or is destroyed
 * ('close' is emitted once it is closed).
 */
export interface FileDownload {
  stream: Readable;
  size: number;
}

/**
 * The content of one volume: a host directory whose contents are untrusted. Each call opens the
 * root anew and holds no descriptor once it returns (a download's stream holds its file's).
 */
export class VolumeContent {
  private readonly defaultUid: number;
  private readonly defaultGid: number;
  private readonly maxListEntries: number;

  constructor(private readonly root: string, private readonly opts: VolumeContentOptions = {}) {
    this.defaultUid = opts.defaultUid ?? VOLUME_CONTENT_DEFAULTS.uid;
    this.defaultGid = opts.defaultGid ?? VOLUME_CONTENT_DEFAULTS.gid;
    this.maxListEntries = opts.maxListEntries ?? DEFAULT_MAX_LIST_ENTRIES;
  }

  /** GET dir: the entries under `path`, depth levels deep, pre-order, names in byte order. */
  async list(path: string, depth = 1): Promise<VolumeEntryStat[]> {
    const vpath = normalizeVolumePath(path);
    checkInt(depth, 'depth', 0, Number.MAX_SAFE_INTEGER);
    const levels = Math.max(depth, LIST_DEPTH.min);
    if (levels > LIST_DEPTH.max) throw badRequest(`depth must be between ${LIST_DEPTH.min} and ${LIST_DEPTH.max}`);
    return this.withRoot(vpath, 'list', async (root) => {
      const dir = await this.openExistingDir(root, vpath);
      try {
        const out: VolumeEntryStat[] = [];
        await this.listInto(dir, levels, out);
        return out;
      } finally {
        if (dir !== root) await dir.close();
      }
    });
  }

  /** POST dir (201). */
  async makeDir(path: string, opts: CreateOptions = {}): Promise<VolumeEntryStat> {
    const vpath = normalizeVolumePath(path);
    const { uid, gid, mode, force } = this.createParams(opts, VOLUME_CONTENT_DEFAULTS.dirMode);
    return this.withRoot(vpath, 'create directory', async (root) => {
      if (vpath === '/') {
        if (!force) throw conflict('failed to create directory: "/" already exists');
        return entryOf('/', '/', await root.stat());
      }
      const parent = await this.walkParent(root, vpath, force ? { uid, gid } : undefined);
      const name = baseName(vpath);
      try {
        try {
          await parent.mkdir(name, mode);
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST' || !force) throw err;
          // force: an existing directory (not a symlink to one) is left as it is.
          const st = await parent.lstat(name);
          if (!st.isDirectory()) throw err;
          return entryOf(name, vpath, st);
        }
        await this.opts.onStep?.({ path: vpath, stage: 'final' });
        return await setOwnerAndMode(parent, name, vpath, uid, gid, mode);
      } finally {
        if (parent !== root) await parent.close();
      }
    });
  }

  /** GET path. A symlink is described, not followed. */
  async stat(path: string): Promise<VolumeEntryStat> {
    const vpath = normalizeVolumePath(path);
    return this.withRoot(vpath, 'stat', async (root) => {
      if (vpath === '/') return entryOf('/', '/', await root.stat());
      const parent = await this.walkParent(root, vpath);
      try {
        return await describe(parent, baseName(vpath), vpath);
      } finally {
        if (parent !== root) await parent.close();
      }
    });
  }

  /**
   * PUT file (201). Without force the file is created exclusively (409 when anything exists
   * there) and written in place; with force missing parents are created and the content goes to
   * a temporary file renamed over the path once complete, so a reader never sees a partial file
   * and a failed upload leaves the old one. Owner and mode are set on the written file in both
   * cases (E2B sets them on overwrite too). A failed upload keeps nothing.
   */
  async writeFile(path: string, body: Readable | AsyncIterable<Uint8Array>, opts: WriteOptions = {}): Promise<VolumeEntryStat> {
    const vpath = normalizeVolumePath(path);
    const { uid, gid, mode, force } = this.createParams(opts, VOLUME_CONTENT_DEFAULTS.fileMode);
    const maxBytes = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    return this.withRoot(vpath, 'write file', async (root) => {
      if (vpath === '/') throw conflict('failed to write file: "/" is a directory');
      const parent = await this.walkParent(root, vpath, force ? { uid, gid } : undefined);
      const name = baseName(vpath);
      try {
        if (force) {
          const existing = await lstatOrNull(parent, name);
          if (existing?.isDirectory()) throw conflict(`failed to write file: "${vpath}" is a directory`);
        }
        const target = force ? `${UPLOAD_PREFIX}${randomBytes(12).toString('hex')}` : name;
        await this.opts.onStep?.({ path: vpath, stage: 'final' });
        const file = await parent.openFile(target, C.O_CREAT | C.O_EXCL | C.O_WRONLY, mode);
        let kept = false;
        try {
          await copyInto(file, body, maxBytes, vpath);
          await file.sync();
          await file.chown(uid, gid);
          // Again after the umask had its say, and after chown (which clears set-id bits).
          await file.chmod(mode);
          if (force) await parent.rename(target, name);
          kept = true;
          return entryOf(name, vpath, await file.stat());
        } finally {
          try {
            if (!kept) await removeOwnFile(parent, target, file);
          } finally {
            await file.close();
          }
        }
      } finally {
        if (parent !== root) await parent.close();
      }
    });
  }

  /** GET file: a regular file's bytes. Anything else (a directory, symlink, FIFO, device) is a 400. */
  async readFile(path: string): Promise<FileDownload> {
    const vpath = normalizeVolumePath(path);
    return this.withRoot(vpath, 'read file', async (root) => {
      if (vpath === '/') throw badRequest('failed to read file: "/" is a directory');
      const parent = await this.walkParent(root, vpath);
      const name = baseName(vpath);
      let file: FileHandle | undefined;
      try {
        // Checked before the open: opening a device node can have effects of its own.
        requireRegular(await parent.lstat(name), vpath);
        await this.opts.onStep?.({ path: vpath, stage: 'final' });
        // O_NONBLOCK: should a FIFO have been swapped in since, the open returns at once.
        file = await parent.openFile(name, C.O_RDONLY | C.O_NONBLOCK);
        const st = await file.stat();
        requireRegular(st, vpath);
        const size = st.size;
        if (size === 0) return { stream: Readable.from([]), size }; // the finally closes the file
        const stream = file.createReadStream({ start: 0, end: size - 1, autoClose: true });
        file = undefined; // the stream owns it now
        return { stream, size };
      } finally {
        if (file) await file.close();
        if (parent !== root) await parent.close();
      }
    });
  }

  /** DELETE path (204): a file or symlink is unlinked, a directory removed with all it holds. */
  async remove(path: string): Promise<void> {
    const vpath = normalizeVolumePath(path);
    if (vpath === '/') throw badRequest('cannot delete root');
    return this.withRoot(vpath, 'delete', async (root) => {
      const parent = await this.walkParent(root, vpath);
      const name = baseName(vpath);
      try {
        const st = await parent.lstat(name);
        await this.opts.onStep?.({ path: vpath, stage: 'final' });
        await removeEntry(parent, Buffer.from(name), st.isDirectory(), 0, { entries: MAX_REMOVE_ENTRIES });
      } finally {
        if (parent !== root) await parent.close();
      }
    });
  }

  /** PATCH path: chmod and/or chown; no field only stats. A symlink's mode cannot be set (400). */
  async updateMetadata(path: string, update: MetadataUpdate): Promise<VolumeEntryStat> {
    const vpath = normalizeVolumePath(path);
    if (update.uid !== undefined) checkInt(update.uid, 'uid', 0, MAX_ID);
    if (update.gid !== undefined) checkInt(update.gid, 'gid', 0, MAX_ID);
    if (update.mode !== undefined) checkInt(update.mode, 'mode', 0, MAX_MODE);
    return this.withRoot(vpath, 'update', async (root) => {
      const parent = vpath === '/' ? root : await this.walkParent(root, vpath);
      const name = vpath === '/' ? '/' : baseName(vpath);
      let node: FileHandle | undefined;
      try {
        // The node itself by an O_PATH descriptor: chmod and chown through it reach that inode only.
        if (vpath !== '/') node = await parent.openNode(name);
        const nodeFd = node ? node.fd : root.fd;
        const before = node ? await node.stat() : await root.stat();
        await this.opts.onStep?.({ path: vpath, stage: 'final' });
        if (update.mode !== undefined) {
          if (before.isSymbolicLink()) throw badRequest(`"${vpath}" is a symlink; its mode cannot be changed (symlinks are not followed)`);
          await chmod(fdPath(nodeFd), update.mode & PERM_MASK);
        }
        if (update.uid !== undefined || update.gid !== undefined) {
          // On an O_PATH descriptor of a symlink this changes the link itself, never its target.
          await chown(fdPath(nodeFd), update.uid ?? -1, update.gid ?? -1);
        }
        const after = node ? await node.stat() : await root.stat();
        const target = after.isSymbolicLink() ? await readlinkOrUndefined(parent, name) : undefined;
        return entryOf(name, vpath, after, target);
      } finally {
        await node?.close();
        if (parent !== root) await parent.close();
      }
    });
  }

  // ---- internals -------------------------------------------------------------------------------

  private createParams(opts: CreateOptions, defaultMode: number): { uid: number; gid: number; mode: number; force: boolean } {
    if (opts.uid !== undefined) checkInt(opts.uid, 'uid', 0, MAX_ID);
    if (opts.gid !== undefined) checkInt(opts.gid, 'gid', 0, MAX_ID);
    if (opts.mode !== undefined) checkInt(opts.mode, 'mode', 0, MAX_MODE);
    if (opts.force !== undefined && typeof opts.force !== 'boolean') throw badRequest('force must be a boolean');
    return {
      uid: opts.uid ?? this.defaultUid,
      gid: opts.gid ?? this.defaultGid,
      mode: (opts.mode ?? defaultMode) & PERM_MASK,
      force: opts.force ?? false,
    };
  }

  /** Opens the root, runs `fn`, closes the root; maps the kernel's errors to E2B's statuses. */
  private async withRoot<T>(vpath: string, action: string, fn: (root: ConfinedDir) => Promise<T>): Promise<T> {
    const root = await ConfinedDir.openRoot(this.root);
    try {
      return await fn(root);
    } catch (err) {
      throw await explain(err, root, vpath, action);
    } finally {
      await root.close();
    }
  }

  /**
   * The parent directory of `vpath` (not '/'). With `create`, missing directories are made as
   * E2B's ensureDirs does: mode 0o777, owned by the request's uid/gid.
   */
  private walkParent(root: ConfinedDir, vpath: string, create?: { uid: number; gid: number }): Promise<ConfinedDir> {
    const parts = pathComponents(vpath);
    return walkDirs(root, parts.slice(0, -1), {
      onStep: (s) => this.opts.onStep?.({ ...s, stage: 'dir' }),
      createMissing: create && (async (dir, name) => {
        try {
          await dir.mkdir(name, VOLUME_CONTENT_DEFAULTS.dirMode);
        } catch (err) {
          if (errnoOf(err) === 'EEXIST') return; // made meanwhile: the walk opens it (or fails on what it is)
          throw err;
        }
        await setOwnerAndMode(dir, name, childPath(dir.volumePath, name), create.uid, create.gid, VOLUME_CONTENT_DEFAULTS.dirMode);
      }),
    });
  }

  /** The directory at `vpath` (the root itself for '/'). */
  private async openExistingDir(root: ConfinedDir, vpath: string): Promise<ConfinedDir> {
    return walkDirs(root, pathComponents(vpath), { onStep: (s) => this.opts.onStep?.({ ...s, stage: 'dir' }) });
  }

  private async listInto(dir: ConfinedDir, levels: number, out: VolumeEntryStat[]): Promise<void> {
    const room = this.maxListEntries - out.length;
    const entries = await dir.readEntries(room + 1);
    if (entries.length > room) throw badRequest(`the listing has more than ${this.maxListEntries} entries; list a smaller depth or a subdirectory`);
    entries.sort((a, b) => Buffer.compare(a.name, b.name));
    for (const ent of entries) {
      const name = ent.name.toString('utf8');
      const path = childPath(dir.volumePath, name);
      let st: Stats;
      try {
        st = await dir.lstat(ent.name);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') continue; // removed since the directory was read
        throw err;
      }
      const target = st.isSymbolicLink() ? await readlinkOrUndefined(dir, ent.name) : undefined;
      out.push(entryOf(name, path, st, target));
      if (out.length > this.maxListEntries) throw badRequest(`the listing has more than ${this.maxListEntries} entries; list a smaller depth or a subdirectory`);
      if (!st.isDirectory() || levels <= 1) continue;
      let child: ConfinedDir;
      try {
        child = await dir.openDir(ent.name, path);
      } catch (err) {
        // Removed, or swapped for a symlink or file, since lstat: nothing to descend into.
        if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') continue;
        throw err;
      }
      try {
        await this.listInto(child, levels - 1, out);
      } finally {
        await child.close();
      }
    }
  }
}
