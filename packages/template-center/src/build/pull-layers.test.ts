import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { BlobCache } from '../blobs/blob-cache.ts';
import type { LayerBlob } from '../layers/layer-blob.ts';
import { pullLayers } from './pull-layers.ts';

const dir = mkdtempSync(join(tmpdir(), 'tc-pull-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const remote = (data: Buffer): LayerBlob => {
  const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
  return { digest, size: data.length, label: digest, remote: true, open: async () => Readable.from((function* () { for (let o = 0; o < data.length; o += 65536) yield data.subarray(o, o + 65536); })()) };
};

/**
 * The pull keeps one count of the image's bytes over all its layers, and stops at
 * template_center.max_image_mb however the layers' own sizes add up; a layer without a size is
 * not downloaded at all (registry-source.ts refuses its manifest first; this is the second line).
 */
test('the layers\' bytes are counted together as they arrive and the pull stops at maxBytes; a layer without a size is not pulled', async () => {
  const cache = new BlobCache({ dir: join(dir, 'blobs'), maxBytes: 1 << 30, logger: silentLogger() });
  await cache.init();
  const layers = [remote(randomBytes(600_000)), remote(randomBytes(600_000)), remote(randomBytes(600_000))];
  const o = { cache, lease: cache.lease(), signal: new AbortController().signal, describe: (i: number) => `layer ${i + 1}/3`, concurrency: 1 };
  await assert.rejects(pullLayers(layers, { ...o, maxBytes: 1_000_000 }), /^Error: the image's layers pass 1 MiB as they download, more than template_center\.max_image_mb$/);
  assert.deepEqual(readdirSync(join(dir, 'blobs', 'tmp')), [], 'the download under way was stopped and removed');
  assert.equal((await pullLayers(layers, { ...o, maxBytes: 2_000_000 })).length, 3, 'within it the pull is as before');
  await assert.rejects(pullLayers([{ ...remote(randomBytes(10)), size: undefined }], o), /^ImageSourceError: layer 1\/3 has no valid size; a layer is not downloaded without one$/);
});
