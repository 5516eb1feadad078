import { createHash } from 'node:crypto';
import { createReadStream, existsSync, type ReadStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { badRequest, conflict, notFound, SvcError, type Logger } from '@svc/common';
import type { LayerOnNode, LayerRef } from '@svc/contracts/node-agent';
import { type MasterDownloads, downloadVerified } from './verified-download.ts';

const LAYER_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function checkLayerId(id: unknown): string {
  if (typeof id !== 'string' || !LAYER_ID.test(id)) throw badRequest(`layer id ${JSON.stringify(id)} is not valid (letters, digits, . _ -, at most 128)`);
  return id;
}

/**
 * Writable layers captured from sandboxes (snapshots, forks): `<dir>/<layerId>.tar`, a tar of
 * the overlay's upper directory with its whiteouts and opaque markers, and `<layerId>.json`
 * saying what it is. A layer is written under a temporary name and renamed once complete, so a
 * half-written one is never listed; a crash leaves only `.part-` files, removed at load.
 * Layers come from a capture here, or downloaded from the artifact store for a create (ensure).
 */
export class LayerStore {
  private readonly known = new Map<string, LayerOnNode>();
  /** Creates reading a layer now: it is not deleted under them. */
  private readonly readers = new Map<string, number>();

  private readonly downloads = new Map<string, Promise<LayerOnNode>>();

  constructor(private readonly dir: string, private readonly logger: Logger, private readonly master?: MasterDownloads) {}

  async load(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      if (name.includes('.part-')) { await rm(join(this.dir, name), { force: true }); continue; }
      if (!name.endsWith('.json')) continue;
      try {
        const l = JSON.parse(await readFile(join(this.dir, name), 'utf8')) as LayerOnNode;
        if (existsSync(this.archivePath(l.layerId))) this.known.set(l.layerId, l);
      } catch (err) {
        this.logger.warn({ err, name }, 'unreadable layer metadata left out');
      }
    }
  }

  list(): LayerOnNode[] { return [...this.known.values()]; }
  get(id: string): LayerOnNode | undefined { return this.known.get(id); }
  archivePath(id: string) { return join(this.dir, `${id}.tar`); }

  /** Bytes free where layers are written (a capture larger than this is refused before it starts). */
  async freeBytes(): Promise<number> {
    const s = await statfs(this.dir);
    return s.bavail * s.bsize;
  }

  /**
   * Writes a new layer: `write` fills the temporary path given; the layer is kept (hashed,
   * described, renamed) only when it returns.
   */
  async add(id: string, meta: Omit<LayerOnNode, 'layerId' | 'sha256' | 'sizeBytes'>, write: (path: string) => Promise<void>): Promise<LayerOnNode> {
    checkLayerId(id);
    if (this.known.has(id)) throw conflict(`layer ${id} already exists on this node`);
    const part = join(this.dir, `${id}.tar.part-${process.pid}-${Date.now()}`);
    try {
      await write(part);
      const sizeBytes = (await stat(part)).size;
      const sha256 = await sha256Of(part);
      const layer: LayerOnNode = { layerId: id, sha256, sizeBytes, ...meta };
      await writeFile(join(this.dir, `${id}.json.part-${process.pid}`), JSON.stringify(layer), { mode: 0o600 });
      await rename(part, this.archivePath(id));
      await rename(join(this.dir, `${id}.json.part-${process.pid}`), join(this.dir, `${id}.json`));
      this.known.set(id, layer);
      return layer;
    } finally {
      await rm(part, { force: true });
      await rm(join(this.dir, `${id}.json.part-${process.pid}`), { force: true });
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
      p = this.add(ref.layerId, { artifactId, contents: ref.contents ?? 'filesystem', createdAt: new Date().toISOString() }, async (part) => {
        const started = Date.now();
        await downloadVerified(`layer ${ref.layerId}`, ref.downloadUrl!, this.master, part, ref);
        this.logger.info({ layerId: ref.layerId, bytes: ref.sizeBytes, ms: Date.now() - started }, 'layer downloaded');
      }).finally(() => this.downloads.delete(ref.layerId));
      this.downloads.set(ref.layerId, p);
    }
    return p;
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

async function sha256Of(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}
