import { spawnSync } from 'node:child_process';
import {
  closeSync, fchmodSync, fchownSync, fstatSync, futimesSync, lchownSync, linkSync, lstatSync, lutimesSync, mkdirSync,
  openSync, readdirSync, rmSync, symlinkSync, writeSync, type Stats,
} from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { extract as tarExtract, type Header } from 'tar-stream';
import { DirTimes } from './dir-times.ts';
import { entryComponents, resolveInRoot, UnsafePathError } from './safe-path.ts';
import { UnpackBudget } from './unpack-budget.ts';

export interface ApplyOptions {
  /** Interpret `.wh.*` entries as OCI/Docker whiteouts (image layers yes, plain rootfs tarballs no). */
  whiteouts: boolean;
}

const WHITEOUT_PREFIX = '.wh.';
const OPAQUE_MARKER = '.wh..wh..opq';
const isRoot = process.getuid?.() === 0;

/**
 * Applies image layers, in order, onto a staging directory: the union the image defines.
 * Every path is resolved inside the staging root (a symbolic link from an earlier layer cannot
 * redirect a write outside it), the final component is never followed, and whatever already sits
 * at a path is replaced. Directory times are set once at the end, since creating children moves them.
 * Every entry is counted against `budget` (default: the entry cap alone): a layer of millions of
 * empty files is small as a tar and large as a file system.
 */
export class LayerApplier {
  private readonly dirTimes = new DirTimes();

  constructor(readonly root: string, private readonly budget = new UnpackBudget()) {}

  async apply(tarStream: Readable, label: string, opts: ApplyOptions): Promise<void> {
    /**
     * The inodes this layer made, which an opaque directory keeps (clearDirectory): inodes, not
     * paths, so that a layer of millions of entries with long names costs a few bytes each.
     */
    const createdHere = new Set<bigint>();
    const extract = tarExtract();
    // tar-stream's streams are streamx streams: piped by hand, errors forwarded by hand.
    tarStream.on('error', (err) => extract.destroy(err));
    tarStream.pipe(extract);
    try {
      for await (const entry of extract) {
        this.budget.takeEntry(label);
        try {
          await this.applyEntry(entry.header, entry as unknown as AsyncIterable<Buffer>, opts, createdHere);
        } catch (err) {
          if (err instanceof UnsafePathError) throw new UnsafePathError(`layer ${label}: ${err.message}`);
          throw err;
        }
        entry.resume();
      }
    } catch (err) {
      extract.destroy();
      tarStream.destroy();
      throw err;
    }
  }

  /** Sets directory times recorded while applying (call after the last layer and any edits). */
  async finish(): Promise<void> {
    await this.dirTimes.apply(this.root);
  }

  private async applyEntry(h: Header, data: AsyncIterable<Buffer>, opts: ApplyOptions, createdHere: Set<bigint>): Promise<void> {
    const parts = entryComponents(h.name);
    if (parts.length === 0) return; // the root directory itself keeps the staging root's metadata
    const base = parts[parts.length - 1];
    const dirParts = parts.slice(0, -1);

    if (opts.whiteouts && base.startsWith(WHITEOUT_PREFIX)) {
      const dirHost = resolveInRoot(this.root, dirParts, true);
      if (base === OPAQUE_MARKER) { this.clearDirectory(dirHost, createdHere); return; }
      const name = base.slice(WHITEOUT_PREFIX.length);
      // `.wh..` and `.wh...` named the directory itself and its parent: at the top, the staging
      // root and the build's own directory, which went (found by a helper reading the template
      // center as an attacker). A whiteout names one entry of its directory, nothing else.
      if (name === '' || name === '.' || name === '..') throw new UnsafePathError(`whiteout ${h.name} names no entry`);
      removeAll(join(dirHost, name));
      return;
    }

    const parentHost = this.ensureParent(dirParts);
    const target = join(parentHost, base);
    const existing = lstatOrNull(target);
    const mode = (h.mode ?? 0o644) & 0o7777;
    const mtime = h.mtime ?? new Date(0);

    switch (h.type) {
      case 'directory': {
        if (existing && !existing.isDirectory()) removeAll(target);
        if (!existing || !existing.isDirectory()) mkdirSync(target, { mode: 0o700 });
        own(target, h.uid, h.gid);
        const ino = chmodNoFollow(target, mode);
        createdHere.add(ino);
        this.dirTimes.record(ino, mtime);
        return;
      }
      case 'file':
      case 'contiguous-file': {
        if (existing) removeAll(target);
        createdHere.add(await writeEntryFile(data, target, mode, h.uid ?? 0, h.gid ?? 0, mtime));
        return;
      }
      case 'symlink': {
        if (existing) removeAll(target);
        symlinkSync(h.linkname ?? '', target);
        own(target, h.uid, h.gid);
        lutimesSync(target, mtime, mtime);
        createdHere.add(inodeOf(target));
        return;
      }
      case 'link': {
        // No inode of its own: a link to a file of this layer shares that file's, already kept. A
        // link to an earlier layer's file is not kept by an opaque marker after it; image writers
        // never make one (the file is copied up into the layer, and the link points there).
        const source = resolveInRoot(this.root, entryComponents(h.linkname ?? ''), false);
        if (source === target) return;
        if (!lstatOrNull(source)) throw new Error(`hard link ${h.name} points to ${h.linkname}, which the layer does not contain`);
        if (existing) removeAll(target);
        linkSync(source, target);
        return;
      }
      case 'character-device':
      case 'block-device':
      case 'fifo': {
        if (existing) removeAll(target);
        makeNode(target, h.name, h.type, mode, h.devmajor ?? 0, h.devminor ?? 0);
        if (lstatOrNull(target)) {
          own(target, h.uid, h.gid);
          lutimesSync(target, mtime, mtime);
          createdHere.add(inodeOf(target));
        }
        return;
      }
      default:
        return; // pax and GNU long-name headers are folded into entries by tar-stream
    }
  }

  /** Parent directories are resolved inside the root; missing ones are created (root-owned, 0755). */
  private ensureParent(dirParts: string[]): string {
    const host = resolveInRoot(this.root, dirParts, true);
    const st = lstatOrNull(host);
    if (st?.isDirectory()) return host;
    if (st) removeAll(host);
    mkdirSync(host, { recursive: true, mode: 0o755 });
    return host;
  }

  /** An opaque directory hides everything below it from earlier layers (not what this layer added). */
  private clearDirectory(dirHost: string, createdHere: Set<bigint>): void {
    let names: string[];
    try {
      names = readdirSync(dirHost);
    } catch {
      return; // no directory there (missing, or not one): nothing of earlier layers to hide
    }
    for (const name of names) {
      const path = join(dirHost, name);
      if (!createdHere.has(inodeOf(path))) removeAll(path);
    }
  }
}

/** Writes a file entry; answers its inode. */
async function writeEntryFile(entry: AsyncIterable<Buffer>, target: string, mode: number, uid: number, gid: number, mtime: Date): Promise<bigint> {
  const fd = openSync(target, 'wx', 0o600);
  try {
    for await (const chunk of entry) {
      let off = 0;
      while (off < chunk.length) off += writeSync(fd, chunk, off, chunk.length - off);
    }
    if (isRoot) fchownSync(fd, uid, gid);
    fchmodSync(fd, mode); // after chown, which clears set-id bits
    futimesSync(fd, mtime, mtime);
    return fstatSync(fd, { bigint: true }).ino;
  } finally {
    closeSync(fd);
  }
}

/**
 * Character devices an image may keep (null, zero, full, random, urandom, tty, console, ptmx):
 * the runtimes give every sandbox its own /dev, and any other node in an image is a way onto the
 * host's hardware for whoever reads or writes the staging tree as root (the template center
 * itself did, through /etc/passwd: inject.ts). Block devices are never made.
 */
const HARMLESS_DEVICES = new Set(['1:3', '1:5', '1:7', '1:8', '1:9', '5:0', '5:1', '5:2']);

function makeNode(target: string, name: string, type: 'character-device' | 'block-device' | 'fifo', mode: number, major: number, minor: number) {
  if (type !== 'fifo' && !isRoot) return; // device nodes need root; an unprivileged build skips them
  if (type === 'block-device' || (type === 'character-device' && !HARMLESS_DEVICES.has(`${major}:${minor}`))) return; // left out, as above
  const kind = type === 'fifo' ? ['p'] : [type === 'character-device' ? 'c' : 'b', String(major), String(minor)];
  const r = spawnSync('mknod', ['-m', mode.toString(8), target, ...kind], { encoding: 'utf8' });
  // Named as the image names it: the message reaches the team, the host path (in mknod's own words) does not.
  if (r.status !== 0) throw new Error(`making the ${type} ${name} failed (mknod exited with ${r.status ?? r.error?.message})`);
}

function own(path: string, uid: number | undefined, gid: number | undefined) {
  if (isRoot) lchownSync(path, uid ?? 0, gid ?? 0);
}

/** Sets a directory's mode; answers its inode. */
function chmodNoFollow(path: string, mode: number): bigint {
  // The target is known not to be a symbolic link here (just created or checked).
  const fd = openSync(path, 'r');
  try {
    fchmodSync(fd, mode);
    return fstatSync(fd, { bigint: true }).ino;
  } finally {
    closeSync(fd);
  }
}

function inodeOf(path: string): bigint {
  return lstatSync(path, { bigint: true }).ino;
}

function lstatOrNull(path: string): Stats | null {
  try { return lstatSync(path); } catch { return null; } // missing: nothing there to replace
}

function removeAll(path: string) {
  rmSync(path, { recursive: true, force: true });
}
