import { spawnSync } from 'node:child_process';
import {
  closeSync, fchmodSync, fchownSync, futimesSync, lchownSync, linkSync, lstatSync, lutimesSync, mkdirSync,
  openSync, readdirSync, rmSync, symlinkSync, writeSync, type Stats,
} from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { extract as tarExtract, type Header } from 'tar-stream';
import { entryComponents, resolveInRoot, UnsafePathError } from './safe-path.ts';

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
 */
export class LayerApplier {
  private readonly dirTimes = new Map<string, Date>();

  constructor(readonly root: string) {}

  async apply(tarStream: Readable, label: string, opts: ApplyOptions): Promise<void> {
    const createdHere = new Set<string>();
    const extract = tarExtract();
    // tar-stream's streams are streamx streams: piped by hand, errors forwarded by hand.
    tarStream.on('error', (err) => extract.destroy(err));
    tarStream.pipe(extract);
    try {
      for await (const entry of extract) {
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
  finish(): void {
    for (const [rel, mtime] of this.dirTimes) {
      const host = join(this.root, rel);
      try {
        if (lstatSync(host).isDirectory()) lutimesSync(host, mtime, mtime);
      } catch { /* removed by a later layer */ }
    }
  }

  private async applyEntry(h: Header, data: AsyncIterable<Buffer>, opts: ApplyOptions, createdHere: Set<string>): Promise<void> {
    const parts = entryComponents(h.name);
    if (parts.length === 0) return; // the root directory itself keeps the staging root's metadata
    const base = parts[parts.length - 1];
    const dirParts = parts.slice(0, -1);
    const rel = parts.join('/');

    if (opts.whiteouts && base.startsWith(WHITEOUT_PREFIX)) {
      const dirHost = resolveInRoot(this.root, dirParts, true);
      if (base === OPAQUE_MARKER) this.clearDirectory(dirHost, dirParts.join('/'), createdHere);
      else removeAll(join(dirHost, base.slice(WHITEOUT_PREFIX.length)));
      return;
    }

    const parentHost = this.ensureParent(dirParts);
    const target = join(parentHost, base);
    const existing = lstatOrNull(target);
    const mode = (h.mode ?? 0o644) & 0o7777;
    const mtime = h.mtime ?? new Date(0);
    createdHere.add(rel);

    switch (h.type) {
      case 'directory': {
        if (existing && !existing.isDirectory()) removeAll(target);
        if (!existing || !existing.isDirectory()) mkdirSync(target, { mode: 0o700 });
        own(target, h.uid, h.gid);
        chmodNoFollow(target, mode);
        this.dirTimes.set(rel, mtime);
        return;
      }
      case 'file':
      case 'contiguous-file': {
        if (existing) removeAll(target);
        await writeEntryFile(data, target, mode, h.uid ?? 0, h.gid ?? 0, mtime);
        return;
      }
      case 'symlink': {
        if (existing) removeAll(target);
        symlinkSync(h.linkname ?? '', target);
        own(target, h.uid, h.gid);
        lutimesSync(target, mtime, mtime);
        return;
      }
      case 'link': {
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
        makeNode(target, h.type, mode, h.devmajor ?? 0, h.devminor ?? 0);
        if (lstatOrNull(target)) {
          own(target, h.uid, h.gid);
          lutimesSync(target, mtime, mtime);
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
  private clearDirectory(dirHost: string, dirRel: string, createdHere: Set<string>): void {
    let names: string[];
    try { names = readdirSync(dirHost); } catch { return; }
    for (const name of names) {
      const rel = dirRel ? `${dirRel}/${name}` : name;
      if (!createdHere.has(rel)) removeAll(join(dirHost, name));
    }
  }
}

async function writeEntryFile(entry: AsyncIterable<Buffer>, target: string, mode: number, uid: number, gid: number, mtime: Date) {
  const fd = openSync(target, 'wx', 0o600);
  try {
    for await (const chunk of entry) {
      let off = 0;
      while (off < chunk.length) off += writeSync(fd, chunk, off, chunk.length - off);
    }
    if (isRoot) fchownSync(fd, uid, gid);
    fchmodSync(fd, mode); // after chown, which clears set-id bits
    futimesSync(fd, mtime, mtime);
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

function makeNode(target: string, type: 'character-device' | 'block-device' | 'fifo', mode: number, major: number, minor: number) {
  if (type !== 'fifo' && !isRoot) return; // device nodes need root; an unprivileged build skips them
  if (type === 'block-device' || (type === 'character-device' && !HARMLESS_DEVICES.has(`${major}:${minor}`))) return; // left out, as above
  const kind = type === 'fifo' ? ['p'] : [type === 'character-device' ? 'c' : 'b', String(major), String(minor)];
  const r = spawnSync('mknod', ['-m', mode.toString(8), target, ...kind], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`mknod ${target}: ${r.stderr?.trim() || r.error?.message}`);
}

function own(path: string, uid: number | undefined, gid: number | undefined) {
  if (isRoot) lchownSync(path, uid ?? 0, gid ?? 0);
}

function chmodNoFollow(path: string, mode: number) {
  // The target is known not to be a symbolic link here (just created or checked).
  const fd = openSync(path, 'r');
  try { fchmodSync(fd, mode); } finally { closeSync(fd); }
}

function lstatOrNull(path: string): Stats | null {
  try { return lstatSync(path); } catch { return null; }
}

function removeAll(path: string) {
  rmSync(path, { recursive: true, force: true });
}
