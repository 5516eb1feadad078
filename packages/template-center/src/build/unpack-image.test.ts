import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { compress, tarOf } from '../test-support/oci-builder.ts';
import type { LayerBlob } from '../layers/layer-blob.ts';
import { ImageTooLargeError, UnpackBudget } from '../layers/unpack-budget.ts';
import { unpackImage } from './unpack-image.ts';

const MB = 1_048_576;
const layerOf = (label: string, bytes: Buffer): LayerBlob => ({ label, verified: true, open: async () => Readable.from([bytes]) });
const info = { layers: 0, sizeBytes: 0 };

/**
 * A layer of a few kilobytes that unpacks to 64 MiB (zeros compress a thousandfold): past the
 * budget the build stops, with what was written so far bounded by it. Before 2026-11-30 nothing
 * stopped an image unpacking to terabytes on the disk shared with the database.
 */
test('an image that unpacks past its budget fails the build, and stops writing there', async () => {
  const bomb = compress(await tarOf([{ name: 'zeros', content: Buffer.alloc(64 * MB) }]), 'gzip');
  assert.ok(bomb.length < MB, `${bomb.length} bytes compressed`);
  const root = mkdtempSync(join(tmpdir(), 'tc-unpack-'));
  try {
    const staging = join(root, 'rootfs');
    const small = { layers: [layerOf('layer 1/2', compress(await tarOf([{ name: 'etc/os-release', content: 'ID=test\n' }]), 'gzip')), layerOf('layer 2/2', bomb)], whiteouts: true, info };
    await assert.rejects(unpackImage(small, staging, { signal: new AbortController().signal, budget: new UnpackBudget(8 * MB) }),
      (e: Error) => e instanceof ImageTooLargeError && /^layer 2\/2 unpacks past 8 MiB, the most this image may take/.test(e.message));
    const written = readdirSync(staging).includes('zeros') ? statSync(join(staging, 'zeros')).size : 0;
    assert.ok(written <= 8 * MB, `${written} bytes written`);
    // Within its budget it unpacks as before.
    const ok = join(root, 'ok');
    await unpackImage(small, ok, { signal: new AbortController().signal, budget: new UnpackBudget(128 * MB) });
    assert.equal(statSync(join(ok, 'zeros')).size, 64 * MB);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
