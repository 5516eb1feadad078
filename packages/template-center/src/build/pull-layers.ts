import { createReadStream } from 'node:fs';
import type { BlobCache, BlobLease } from '../blobs/blob-cache.ts';
import { ImageSourceError } from '../image/resolved-image.ts';
import { isBlobSize, type LayerBlob } from '../layers/layer-blob.ts';
import { ImageTooLargeError } from '../layers/unpack-budget.ts';
import { stage } from './build-error.ts';

export interface PullOptions {
  cache: BlobCache;
  lease: BlobLease;
  signal: AbortSignal;
  /** Downloads at once (default 3, like skopeo's handful of parallel layer copies). */
  concurrency?: number;
  /**
   * template_center.max_image_mb in bytes: the layers' bytes, all together as they arrive (cached
   * ones at their size), past it stop the pull. Each download is held to its declared size too.
   */
  maxBytes?: number;
  /** How layer `i` is named in messages ("layer 2/3 sha256:…"). */
  describe: (i: number) => string;
  onLayerStart?: (i: number) => void;
  onLayerBytes?: (i: number, n: number) => void;
  onLayerDone?: (i: number, hit: boolean) => void;
}

/**
 * Brings every remote layer into the blob cache, several at once, and returns the layers to
 * apply: remote ones replaced by their verified cached files, local ones (OCI layout, archives,
 * tarballs) as they are. The first failure stops the other downloads; no partial file is left.
 */
export async function pullLayers(layers: LayerBlob[], o: PullOptions): Promise<LayerBlob[]> {
  const out = [...layers];
  const todo = layers.flatMap((l, i) => (l.remote ? [i] : []));
  const stopOthers = new AbortController();
  const signal = AbortSignal.any([o.signal, stopOthers.signal]);
  const byDigest = new Map<string, Promise<{ path: string; hit: boolean }>>();
  let failure: { err: unknown } | undefined;
  let pulled = 0;
  const count = (n: number) => {
    pulled += n;
    if (o.maxBytes === undefined || pulled <= o.maxBytes || failure) return;
    // Every download under way stops with this as its reason (the blob cache throws the signal's).
    failure = { err: new ImageTooLargeError(`the image's layers pass ${Math.ceil(o.maxBytes / 1_048_576)} MiB as they download, more than template_center.max_image_mb`) };
    stopOthers.abort(failure.err);
  };

  const pullOne = async (i: number) => {
    const layer = layers[i];
    const digest = layer.digest!;
    const size = layer.size;
    // A download is held to its declared size (registry-source.ts refuses a descriptor without one).
    if (!isBlobSize(size)) throw new ImageSourceError(`${o.describe(i)} has no valid size; a layer is not downloaded without one`);
    o.onLayerStart?.(i);
    // The same blob twice in one image is fetched once.
    const shared = byDigest.get(digest);
    // No host path in the stage: its words reach the team (the log has the cache's directory).
    const fetched = shared ?? stage(() => `downloading ${o.describe(i)}`, o.signal, () => o.cache.fetch({
      digest, scope: layer.cacheScope, size, label: layer.label, open: (s) => layer.open(s), signal,
      onBytes: (n) => { count(n); o.onLayerBytes?.(i, n); },
    }, o.lease));
    if (!shared) byDigest.set(digest, fetched);
    const { path, hit } = await fetched;
    if (shared && layer.size) o.onLayerBytes?.(i, layer.size);
    o.onLayerDone?.(i, hit);
    out[i] = { ...layer, remote: false, verified: true, open: async () => createReadStream(path, { highWaterMark: 1024 * 1024 }) };
  };

  let next = 0;
  const worker = async () => {
    while (!failure && next < todo.length) {
      const i = todo[next++];
      try {
        await pullOne(i);
      } catch (err) {
        failure ??= { err };
        stopOthers.abort(new Error('another layer failed'));
      }
    }
  };
  const workers = Math.max(1, Math.min(o.concurrency ?? 3, todo.length));
  await Promise.all(Array.from({ length: workers }, worker));
  if (failure) throw failure.err;
  return out;
}
