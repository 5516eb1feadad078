import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import type { ResolvedImage } from '../image/resolved-image.ts';
import { LayerApplier } from '../layers/apply-layer.ts';
import { decompress } from '../layers/decompress.ts';
import { DigestMismatchError, type LayerBlob } from '../layers/layer-blob.ts';
import { ImageTooLargeError, UnpackBudget } from '../layers/unpack-budget.ts';
import { VerifiedFeed } from '../layers/verified-feed.ts';
import { isSystemError } from './build-error.ts';

export interface UnpackOptions {
  signal: AbortSignal;
  /**
   * What the layers may unpack to, all together: their tar streams' bytes and every entry's
   * overhead (unpack-budget.ts); past it the build fails. The build goes on charging it for
   * /etc/skel's copy (rootfs/inject.ts). Default: the entry cap alone.
   */
  budget?: UnpackBudget;
  onLayerStart?: (index: number) => void;
  onLayerBytes?: (index: number, n: number) => void;
}

/**
 * Applies every layer of `image`, in order, onto `staging`: read, verify, decompress, apply.
 * Layers pulled into the blob cache are already verified and their bytes already counted.
 */
export async function unpackImage(image: ResolvedImage, staging: string, opts: UnpackOptions): Promise<void> {
  const budget = opts.budget ?? new UnpackBudget();
  const applier = new LayerApplier(staging, budget);
  for (let i = 0; i < image.layers.length; i++) {
    opts.signal.throwIfAborted();
    opts.onLayerStart?.(i);
    await applyLayer(image.layers[i], applier, image.whiteouts, opts.signal, (n) => opts.onLayerBytes?.(i, n), budget);
  }
  await applier.finish();
}

/**
 * Counts the unpacked bytes against what is left of the budget: a compressed layer of tens of
 * megabytes unpacked to terabytes (a gzip or zstd bomb), filling the disk shared with the
 * database and every team's artifacts before anything stopped it.
 */
function unpackBudget(budget: UnpackBudget, label: string, source: Readable): Transform {
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      try {
        budget.takeBytes(chunk.length, label);
      } catch (err) {
        cb(err as Error);
        return;
      }
      cb(null, chunk);
    },
  });
  source.on('error', (err) => t.destroy(err));
  return t;
}

async function applyLayer(layer: LayerBlob, applier: LayerApplier, whiteouts: boolean, signal: AbortSignal, onBytes: (n: number) => void, budget: UnpackBudget) {
  const raw = await layer.open(signal);
  const onAbort = () => raw.destroy(signal.reason as Error);
  signal.addEventListener('abort', onAbort, { once: true });
  const feed = new VerifiedFeed(raw, layer.verified
    ? { label: layer.label }
    : { expectedDigest: layer.digest, expectedSize: layer.size, label: layer.label, onBytes });
  try {
    let tar: Readable = await decompress(feed.feed);
    if (layer.diffId) tar = tar.pipe(diffIdCheck(layer.diffId, layer.label, tar));
    if (budget.maxBytes !== Infinity) tar = tar.pipe(unpackBudget(budget, layer.label, tar));
    try {
      await applier.apply(tar, layer.label, { whiteouts });
    } catch (err) {
      // A local failure (disk full, permissions) is the answer; a broken stream may really be a
      // blob that is not what its digest promised, which the feed finds out by reading to the end.
      if (isSystemError(err) || signal.aborted || err instanceof ImageTooLargeError) {
        raw.destroy();
        throw signal.aborted ? signal.reason : err;
      }
      feed.stopFeeding();
      await feed.done;
      throw err;
    }
    await feed.done;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function diffIdCheck(diffId: string, label: string, source: Readable): Transform {
  const [algo] = diffId.split(':');
  const hash = createHash(algo === 'sha512' ? 'sha512' : 'sha256');
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) { hash.update(chunk); cb(null, chunk); },
    flush(cb) {
      const got = `${algo}:${hash.digest('hex')}`;
      cb(got === diffId ? null : new DigestMismatchError(`layer ${label} digest mismatch: its content hashes to ${got}`));
    },
  });
  source.on('error', (err) => t.destroy(err));
  return t;
}
