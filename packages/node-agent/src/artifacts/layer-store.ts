import { createHash } from 'node:crypto';
import { createReadStream, existsSync, type ReadStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { badRequest, conflict, notFound, PendingBytes, SvcError, type Logger } from '@svc/common';
import type { LayerOnNode, LayerRef } from '@svc/contracts/node-agent';
import { type MasterDownloads, downloadVerified } from './verified-download.ts';

const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function checkLayerId(id: unknown): string {
  if (typeof id !== 'string' || !LAYER_ID.test(id)) throw badRequest(`layer id ${JSON.stringify(id)} is not valid (letters, digits, . _ -, at most 128)`);
  return id;
}

/** A layer's write passed the bytes it was allowed (LayerStore.add's maxBytes): 507, nothing kept. */
export class LayerTooLarge extends SvcError {
  constructor(readonly layerId: string, readonly maxBytes: number) {
    super(507, `layer ${layerId} would pass the ${maxBytes} bytes it may take: nothing was kept`);
  }
}

/**
 * A layer's write failed because the disk where layers go filled up (a capture is reserved for
 * what it will likely write, not its bound: sandboxes/capture.ts): 507, nothing kept.
 */
export class LayerNoRoom extends SvcError {
  constructor(readonly layerId: string) {
    super(507, `layer ${layerId}: the disk where this node keeps layers filled up while it was written: nothing was kept`);
  }
}

/** Room left below which a failed write is taken for one the full disk stopped. */
const FULL_BELOW_BYTES = 1024 * 1024;

/** ENOSPC in a write's error: Node's own (code), or a command's words (tar: `Cannot write: No space left on device`). */
function isNoSpace(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOSPC' || /No space left on device|ENOSPC/.test((err as Error)?.message ?? String(err));
}

/**
 * Writable layers captured from sandboxes (snapshots, forks): `<dir>/<layerId>.tar`, a tar of
 * the overlay's upper directory with its whiteouts and opaque markers, and `<layerId>.json`
 * saying what it is. A layer is written under a temporary name, flushed to disk, and renamed
 * once complete (the archive, then its description), so a half-written one is never listed; a
 * crash leaves `.part-` files, or an archive whose description was never renamed, and load
 * removes both (until 2026-12-01 such an archive stayed on the disk for good).
 * Layers come from a capture here, or downloaded from the artifact store for a create (ensure).
 */
export class LayerStore {
  private readonly known = new Map<string, LayerOnNode>();
  /** Creates reading a layer now: it is not deleted under them. */
  private readonly readers = new Map<string, number>();

  private readonly downloads = new Map<string, Promise<LayerOnNode>>();
  /** What captures and downloads under way may still write (reserve). */
  private readonly pending = new PendingBytes();

  constructor(private readonly dir: string, private readonly logger: Logger, private readonly master?: MasterDownloads) {}

  /**
   * The layers on disk, and what a crash left half-made removed: `.part-` files, an archive
   * without its description (a crash between add's two renames, or remove's two deletes), a
   * description without its archive. Runs before anything else uses the store.
   */
  async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const names = await readdir(this.dir);
    const strays: string[] = [];
    for (const name of names) {
      if (name.includes('.part-')) { strays.push(name); continue; }
      if (!name.endsWith('.json')) continue;
      try {
        const l = JSON.parse(await readFile(join(this.dir, name), 'utf8')) as LayerOnNode;
        if (existsSync(this.archivePath(l.layerId))) this.known.set(l.layerId, l);
        else strays.push(name);
      } catch (err) {
        this.logger.warn({ err, name }, 'unreadable layer metadata left out');
      }
    }
    strays.push(...names.filter((n) => n.endsWith('.tar') && !this.known.has(n.slice(0, -'.tar'.length))));
    for (const name of strays) await rm(join(this.dir, name), { force: true });
    if (strays.length) this.logger.info({ removed: strays }, 'half-made layer files removed');
  }

  list(): LayerOnNode[] { return [...this.known.values()]; }
  get(id: string): LayerOnNode | undefined { return this.known.get(id); }
  archivePath(id: string) { return join(this.dir, `${id}.tar`); }

  /** Bytes free where layers are written (sandbox creates keep a reserve of it: create.ts). */
  async freeBytes(): Promise<number> {
    const s = await statfs(this.dir);
    return s.bavail * s.bsize;
  }

  /**
   * Holds `bytes` of the room where layers are written for one write (a capture's bound, a
   * download's size) until release(): 507 when the room free, less what writes under way still
   * hold, is smaller. Read after the await and reserved before the next one, so two checks at
   * once cannot both pass on the same room.
   */
  async reserve(bytes: number, what: string): Promise<{ release(): void }> {
    const free = await this.freeBytes();
    if (free - this.pending.bytes < bytes) {
      const others = this.pending.bytes > 0 ? `, less ${this.pending.bytes} that captures and downloads under way may still write` : '';
      throw new SvcError(507, `${what} may take up to ${bytes} bytes where this node keeps snapshots, and ${free} are free there${others}`);
    }
    return this.pending.reserve(bytes);
  }

  /**
   * Writes a new layer: `write` fills the temporary path given; the layer is kept (hashed,
   * flushed, described, renamed) only when it returns. With `maxBytes`, a write that stopped at
   * that bound (capped-tar.ts) or passed it is a LayerTooLarge, and nothing is kept. A write the
   * full disk stopped (ENOSPC, or next to no room left while its part is still there) is a
   * LayerNoRoom; the part is removed all the same.
   */
  async add(id: string, meta: Omit<LayerOnNode, 'layerId' | 'sha256' | 'sizeBytes'>, write: (path: string) => Promise<void>, o: { maxBytes?: number } = {}): Promise<LayerOnNode> {
    checkLayerId(id);
    if (this.known.has(id)) throw conflict(`layer ${id} already exists on this node`);
    const part = join(this.dir, `${id}.tar.part-${process.pid}-${Date.now()}`);
    const jsonPart = join(this.dir, `${id}.json.part-${process.pid}`);
    try {
      await write(part).catch(async (err: unknown) => {
        if (o.maxBytes !== undefined && (await sizeOf(part)) >= o.maxBytes) {
          this.logger.warn({ layerId: id, maxBytes: o.maxBytes, err: (err as Error)?.message }, 'layer write stopped at its bound');
          throw new LayerTooLarge(id, o.maxBytes);
        }
        // Asked before the part goes: tar may say only `Wrote only 4096 of 10240 bytes`. Free room
        // that cannot be read is taken as plenty: the write's own error is then the one thrown.
        if (isNoSpace(err) || (await this.freeBytes().catch(() => Infinity)) < FULL_BELOW_BYTES) throw new LayerNoRoom(id);
        throw err;
      });
      const sizeBytes = (await stat(part)).size;
      if (o.maxBytes !== undefined && sizeBytes > o.maxBytes) throw new LayerTooLarge(id, o.maxBytes);
      const sha256 = await sha256Of(part);
      const layer: LayerOnNode = { layerId: id, sha256, sizeBytes, ...meta };
      // On disk before the names say it is complete: a power loss right after must not leave a
      // described layer whose bytes never reached the disk.
      await syncFile(part);
      await writeSynced(jsonPart, JSON.stringify(layer));
      await rename(part, this.archivePath(id));
      await rename(jsonPart, join(this.dir, `${id}.json`));
      await syncFile(this.dir);
      this.known.set(id, layer);
      return layer;
    } finally {
      await rm(part, { force: true });
      await rm(jsonPart, { force: true });
    }
  }

  /**
   * The layer `ref` names, present and verified: downloaded when this node lacks it and `ref`
   * says from where (concurrent calls share one download); `artifactId` is the template image
   * a downloaded layer lies over.
   */
  async ensure(ref: LayerRef, artifactId: string): Promise<LayerOnNode> {
    checkLayerId(ref.layerId);
    const have = this.known.get(ref.layerId);
    if (have) {
      if (have.sha256 !== ref.sha256.toLowerCase()) throw conflict(`layer ${ref.layerId} is on this node with sha256 ${have.sha256}, not ${ref.sha256}`);
      return have;
    }
    if (!ref.downloadUrl) throw notFound(`layer ${ref.layerId} is not on this node`);
    let p = this.downloads.get(ref.layerId);
    if (!p) {
      p = this.download(ref, artifactId).finally(() => this.downloads.delete(ref.layerId));
      this.downloads.set(ref.layerId, p);
    }
    return p;
  }

  /**
   * A layer downloaded into the store, its size held against the room meanwhile (reserve). No
   * room (at the start, or the disk filled meanwhile) is a 503, as a create's own disk check
   * (create.ts): the master asks another node.
   */
  private async download(ref: LayerRef, artifactId: string): Promise<LayerOnNode> {
    const noRoom = (err: SvcError) => new SvcError(503, err.message, { headers: { 'Retry-After': '30' } });
    const room = await this.reserve(ref.sizeBytes, `layer ${ref.layerId}`).catch((err: SvcError) => { throw noRoom(err); });
    try {
      return await this.add(ref.layerId, { artifactId, contents: ref.contents ?? 'filesystem', createdAt: new Date().toISOString() }, async (part) => {
        const started = Date.now();
        await downloadVerified(`layer ${ref.layerId}`, ref.downloadUrl!, this.master, part, ref);
        this.logger.info({ layerId: ref.layerId, bytes: ref.sizeBytes, ms: Date.now() - started }, 'layer downloaded');
      }).catch((err: unknown) => { throw err instanceof LayerNoRoom ? noRoom(err) : err; });
    } finally {
      room.release();
    }
  }

  /**
   * The layer's archive as a stream (GET /v1/layers/:id/archive), held against deletion until
   * the stream closes.
   */
  openArchive(id: string): { layer: LayerOnNode; stream: ReadStream } {
    const layer = this.known.get(id);
    if (!layer) throw notFound(`layer ${id} is not on this node`);
    const stream = createReadStream(this.archivePath(id), { highWaterMark: 1024 * 1024 });
    this.hold(id);
    // Held until every byte is read ('end'), or until the stream is torn down without it
    // ('close'). 'close' alone comes after the reader has had the last byte, so a reader that
    // deleted the layer right away found it still held.
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.release(id);
    };
    stream.once('end', release);
    stream.once('close', release);
    return { layer, stream };
  }

  /** Runs `fn` with the layer's archive, holding it against deletion meanwhile. */
  async reading<T>(id: string, fn: (archivePath: string, layer: LayerOnNode) => Promise<T>): Promise<T> {
    const layer = this.known.get(id);
    if (!layer) throw notFound(`layer ${id} is not on this node`);
    this.hold(id);
    try {
      return await fn(this.archivePath(id), layer);
    } finally {
      this.release(id);
    }
  }

  private hold(id: string) {
    this.readers.set(id, (this.readers.get(id) ?? 0) + 1);
  }

  private release(id: string) {
    const n = (this.readers.get(id) ?? 1) - 1;
    if (n > 0) this.readers.set(id, n);
    else this.readers.delete(id);
  }

  async remove(id: string): Promise<void> {
    checkLayerId(id);
    if (!this.known.has(id)) throw notFound(`layer ${id} is not on this node`);
    const readers = this.readers.get(id) ?? 0;
    if (readers > 0) throw new SvcError(409, `layer ${id} is being read (${readers} create or download) on this node; retry when done`);
    this.known.delete(id);
    await rm(join(this.dir, `${id}.json`), { force: true });
    await rm(this.archivePath(id), { force: true });
  }
}

/** A file's size; 0 when there is none (a write that failed before it made one). */
async function sizeOf(path: string): Promise<number> {
  return (await stat(path).catch(() => { /* no file: nothing was written */ return undefined; }))?.size ?? 0;
}

/** fsync of a file or a directory (the directory makes its renames durable). */
async function syncFile(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeSynced(path: string, text: string): Promise<void> {
  const fh = await open(path, 'w', 0o600);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function sha256Of(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}
