import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rm, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest, conflict, fileStreamClosed, PendingBytes, SvcError } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import { LAYER_SHA256_HEADER, TEMPLATE_CENTER_ROUTES as R, type ArtifactStored } from '@svc/contracts/template-center';
import { isValidArtifactId, type ArtifactStore } from './store/artifact-store.ts';

/** Room kept free beside an upload, for the store's records and whatever else writes there. */
export const LAYER_ROOM_MARGIN = 64 * 1024 * 1024;

export interface LayerRouteOptions {
  /** Bytes free in a directory (default: statfs); tests give a small one. */
  freeBytes?: (dir: string) => Promise<number>;
  /** An upload whose bytes stop arriving this long is abandoned (default 60 s). */
  idleTimeoutMs?: number;
}

const SHA256_RE = /^[0-9a-f]{64}$/i;

/**
 * PUT /tc/api/v1/layer/:layerId: a snapshot layer's tar, or a template build's context files,
 * streamed into the artifact store, where it then downloads and deletes as an artifact does.
 * A layer comes with the sha256 its node computed, which the bytes must have; context files come
 * without one (their id is the SDK's hash of the files, not of the archive) and are stored with
 * the sha256 their bytes have. Registered in a scope of its own: the body is the raw request,
 * read without fastify's body limit.
 */
export async function registerLayerRoutes(app: FastifyInstance, store: ArtifactStore, opts: LayerRouteOptions = {}): Promise<void> {
  const freeBytes = opts.freeBytes ?? (async (dir: string) => { const s = await statfs(dir); return s.bavail * s.bsize; });
  const idleTimeoutMs = opts.idleTimeoutMs ?? 60_000;
  const uploads = new KeyedQueue();
  const pending = new PendingBytes();

  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // The handler reads req.raw itself.
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    serve(scope, R.putLayer, async (req) => {
      const { layerId } = req.params;
      if (!isValidArtifactId(layerId)) throw badRequest('invalid layer id');
      const header = req.headers[LAYER_SHA256_HEADER];
      if (header !== undefined && (typeof header !== 'string' || !SHA256_RE.test(header))) throw badRequest(`${LAYER_SHA256_HEADER} must be a sha256 of 64 hex digits`);
      const sha256 = header?.toLowerCase();
      const sizeBytes = contentLength(req.headers['content-length']);
      // A second upload of the same id waits for the first, then finds what it stored.
      return uploads.run(layerId, () => storeLayer(req, store, layerId, { sha256, sizeBytes }, { freeBytes, idleTimeoutMs, pending }));
    });
  });
}

async function storeLayer(
  req: FastifyRequest, store: ArtifactStore, layerId: string, meta: { sha256?: string; sizeBytes: number },
  { freeBytes, idleTimeoutMs, pending }: { freeBytes: (dir: string) => Promise<number>; idleTimeoutMs: number; pending: PendingBytes },
): Promise<ArtifactStored> {
  // Answers before the body is read leave it to node, which reads and drops the rest.
  const existing = await store.get(layerId);
  if (existing) {
    if (meta.sha256 && existing.sha256 !== meta.sha256) throw conflict(`layer ${layerId} is already stored with sha256 ${existing.sha256}`);
    return existing;
  }
  if (store.maxArtifactBytes !== undefined && meta.sizeBytes > store.maxArtifactBytes) {
    throw new SvcError(507, `layer ${layerId} of ${meta.sizeBytes} bytes exceeds the ${store.maxArtifactBytes} bytes the ${store.kind} store takes in one upload`);
  }
  // The s3 store stages the upload in its scratch dir too, so the room is checked for both stores.
  const needed = meta.sizeBytes + LAYER_ROOM_MARGIN;
  const free = await freeBytes(store.scratchDir);
  // Read after the await, and reserved before the next one: uploads under way have been promised
  // room the disk does not show as taken yet, and ten uploads at once each passed the check the
  // room of one passed (found by a helper reading the template center as an attacker).
  if (free - pending.bytes < needed) throw noRoom(layerId, needed, free, pending.bytes);
  const room = pending.reserve(meta.sizeBytes);

  const part = join(store.scratchDir, `layer-${layerId}.part-${randomBytes(6).toString('hex')}`);
  try {
    const hash = createHash('sha256');
    let seen = 0;
    // 0600: a team's layer, and with an S3 store no 0700 store directory holds the scratch one.
    const file = createWriteStream(part, { flags: 'wx', mode: 0o600 });
    // A sender that stalls without closing (a partition) would hold the id's queue and the part
    // file; cleared once the body is in, before a long store.put (s3) leaves the socket idle.
    req.raw.setTimeout(idleTimeoutMs, () => req.raw.destroy());
    try {
      await pipeline(
        // Not destroyed when the file fails: that would cut the connection before the answer.
        req.raw.iterator({ destroyOnReturn: false }),
        async function* count(source: AsyncIterable<Buffer>) {
          for await (const chunk of source) { hash.update(chunk); seen += chunk.length; room.written(chunk.length); yield chunk; }
        },
        file,
      );
    } catch (err) {
      await fileStreamClosed(file);
      // The client went away: nobody reads this answer, but it is no server error either.
      if (req.raw.destroyed && !req.raw.complete) throw badRequest(`the upload of layer ${layerId} ended after ${seen} of ${meta.sizeBytes} bytes`);
      // The file failed with the client still sending: drop the rest so the answer reaches it.
      if (!req.raw.complete) req.raw.resume();
      if ((err as NodeJS.ErrnoException).code === 'ENOSPC') throw noRoom(layerId, needed, await freeBytes(store.scratchDir), pending.bytes);
      throw err;
    } finally {
      req.raw.socket?.setTimeout(0);
    }
    if (seen !== meta.sizeBytes) throw badRequest(`layer ${layerId}: ${seen} bytes arrived, content-length said ${meta.sizeBytes}; nothing kept`);
    const got = hash.digest('hex');
    if (meta.sha256 && got !== meta.sha256) throw badRequest(`layer ${layerId}: the bytes that arrived have sha256 ${got}, ${LAYER_SHA256_HEADER} said ${meta.sha256}; nothing kept`);
    return await store.put(layerId, part, { sha256: got, sizeBytes: seen }, { move: true });
  } finally {
    room.release();
    await rm(part, { force: true });
  }
}

function contentLength(value: string | undefined): number {
  if (value === undefined) throw badRequest('content-length is required: a layer is uploaded with its size');
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n)) throw badRequest(`content-length must be a non-negative integer, not ${JSON.stringify(value)}`);
  return n;
}

function noRoom(layerId: string, needed: number, free: number, promised: number): SvcError {
  const others = promised > 0 ? `, less ${promised} that uploads under way will still write` : '';
  return new SvcError(507, `no room for layer ${layerId}: it needs ${needed} bytes (its size and a ${LAYER_ROOM_MARGIN}-byte margin), ${free} are free${others}`);
}

/** Runs one task per key at a time, in arrival order. */
class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.catch(() => { /* the previous task's failure is its own caller's answer; this one runs regardless */ }).then(task);
    const tail = result.catch(() => { /* this task's failure goes to its caller through `result`; the queue only waits */ });
    this.tails.set(key, tail);
    void tail.then(() => { if (this.tails.get(key) === tail) this.tails.delete(key); });
    return result;
  }
}
