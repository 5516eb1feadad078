import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { progressKey, type JobProgress, type JobStatusReport } from '@svc/contracts/template-center';
import { mountReadOnly } from './test-support/ext4-mount.ts';
import { startHarness, type Harness } from './test-support/harness.ts';
import { startMiniRegistry, type MiniRegistry } from './test-support/mini-registry.ts';
import { OciLayoutWriter, type LayerSpec } from './test-support/oci-builder.ts';

const BASE_DATA = randomBytes(2 * 1024 * 1024);
const base1: LayerSpec = { entries: [{ name: 'base/', type: 'directory' }, { name: 'base/data', content: BASE_DATA }] };
const base2: LayerSpec = { compression: 'zstd', entries: [{ name: 'etc/', type: 'directory' }, { name: 'etc/os-release', content: 'ID=cachetest\n' }] };
const app = (name: string): LayerSpec => ({ entries: [{ name: 'app/', type: 'directory' }, { name: `app/${name}`, content: `${name}\n` }] });

let scratch: string;
let layout: string;
let registry: MiniRegistry;
let h: Harness;
const digests: Record<string, string> = {};

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-cache-'));
  layout = join(scratch, 'layout');
  const w = new OciLayoutWriter(layout);
  const a = await w.tag({ layers: [base1, base2, app('a')] }, 'a');
  const b = await w.tag({ layers: [base1, base2, app('b')] }, 'b');
  const slow = await w.tag({ layers: [{ entries: [{ name: 'one', content: randomBytes(400 * 1024) }] }, { entries: [{ name: 'two', content: randomBytes(400 * 1024) }] }] }, 'slow');
  [digests.base1, digests.base2, digests.appA] = a.layers.map((l) => l.digest);
  digests.appB = b.layers[2].digest;
  [digests.slow1, digests.slow2] = slow.layers.map((l) => l.digest);
  assert.deepEqual(b.layers.slice(0, 2).map((l) => l.digest), [digests.base1, digests.base2], 'the images share their base layers');
  await w.write();
  registry = await startMiniRegistry(layout);
  h = await startHarness();
});

after(async () => {
  await h?.close();
  await registry?.close();
  rmSync(scratch, { recursive: true, force: true });
});

async function build(hh: Harness, ref: string, host = registry.host): Promise<{ r: JobStatusReport; progress: JobProgress }> {
  const req = await hh.submit({ kind: 'registry', ref: `${host}/test/app:${ref}`, insecure: true });
  const r = await hh.master.final(req.jobId, 60_000);
  // The last progress snapshot is written just after the final report.
  for (let i = 0; ; i++) {
    const raw = await hh.coordination.kvGet(progressKey(req.jobId));
    const progress = raw ? (JSON.parse(raw) as JobProgress) : undefined;
    if (progress && ['built', 'failed'].includes(progress.message ?? '')) return { r, progress };
    assert.ok(i < 100, 'no final progress');
    await new Promise((res) => setTimeout(res, 50));
  }
}

const cachedPath = (hh: Harness, digest: string) => join(hh.blobCacheDir, 'sha256', digest.slice(7));
const fileSha = (p: string) => `sha256:${createHash('sha256').update(readFileSync(p)).digest('hex')}`;

describe('layer blob cache', () => {
  test('a second image sharing base layers downloads only its own layer', async () => {
    const first = await build(h, 'a');
    assert.equal(first.r.status, 'BUILT', first.r.error);
    assert.deepEqual([digests.base1, digests.base2, digests.appA].map((d) => registry.blobGets(d)), [1, 1, 1]);
    assert.deepEqual(first.progress.layers.map((l) => l.cached ?? false), [false, false, false]);
    for (const d of [digests.base1, digests.base2, digests.appA]) assert.equal(fileSha(cachedPath(h, d)), d, 'verified blob in the cache');

    const second = await build(h, 'b');
    assert.equal(second.r.status, 'BUILT', second.r.error);
    assert.deepEqual([digests.base1, digests.base2, digests.appB].map((d) => registry.blobGets(d)), [1, 1, 1], 'no second download of the shared layers');
    assert.deepEqual(second.progress.layers.map((l) => l.cached ?? false), [true, true, false]);
    for (const l of second.progress.layers) assert.equal(l.doneBytes, l.totalBytes);
    const m = mountReadOnly(second.r.artifact!.location);
    try {
      assert.deepEqual(readFileSync(join(m.dir, 'base/data')), BASE_DATA);
      assert.equal(readFileSync(join(m.dir, 'etc/os-release'), 'utf8'), 'ID=cachetest\n');
      assert.equal(readFileSync(join(m.dir, 'app/b'), 'utf8'), 'b\n');
      assert.ok(!existsSync(join(m.dir, 'app/a')));
    } finally {
      m.unmount();
    }
    assert.deepEqual(await h.leftovers(), []);
  });

  test('a damaged cached blob is noticed, deleted and downloaded again', async () => {
    const path = cachedPath(h, digests.base1);
    const data = readFileSync(path);
    data[5000] ^= 0xff;
    writeFileSync(path, data);
    const again = await build(h, 'a');
    assert.equal(again.r.status, 'BUILT', again.r.error);
    assert.deepEqual([digests.base1, digests.base2, digests.appA].map((d) => registry.blobGets(d)), [2, 1, 1]);
    assert.deepEqual(again.progress.layers.map((l) => l.cached ?? false), [false, true, true]);
    assert.equal(fileSha(path), digests.base1);
    const m = mountReadOnly(again.r.artifact!.location);
    try { assert.deepEqual(readFileSync(join(m.dir, 'base/data')), BASE_DATA); } finally { m.unmount(); }
  });

  test('layers download at once', async () => {
    const slow = await startMiniRegistry(layout, { slowBytesPerSec: 512 * 1024 });
    try {
      const req = await h.submit({ kind: 'registry', ref: `${slow.host}/test/app:slow`, insecure: true });
      let overlapped = false;
      for (let i = 0; i < 300 && !overlapped; i++) {
        const raw = await h.coordination.kvGet(progressKey(req.jobId));
        const layers = raw ? (JSON.parse(raw) as JobProgress).layers : [];
        overlapped = layers.length === 2 && layers.every((l) => l.doneBytes > 0 && l.doneBytes < l.totalBytes);
        if (layers.some((l) => l.totalBytes > 0 && l.doneBytes === l.totalBytes)) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(overlapped, 'both layers were in flight at once');
      assert.equal((await h.master.final(req.jobId, 60_000)).status, 'BUILT');
      assert.deepEqual([slow.blobGets(digests.slow1), slow.blobGets(digests.slow2)], [1, 1]);
    } finally {
      await slow.close();
    }
  });

  test('a blob that does not match its digest is deleted, never cached', async () => {
    const bad = join(scratch, 'bad-layout');
    cpSync(layout, bad, { recursive: true });
    const blob = join(bad, 'blobs/sha256', digests.appB.slice(7));
    const data = readFileSync(blob);
    data[data.length - 30] ^= 0xff;
    writeFileSync(blob, data);
    const badRegistry = await startMiniRegistry(bad);
    const hs = await startHarness();
    try {
      const { r } = await build(hs, 'b', badRegistry.host);
      assert.equal(r.status, 'FAILED');
      assert.match(r.error!, new RegExp(`^layer ${digests.appB} digest mismatch`));
      assert.ok(!existsSync(cachedPath(hs, digests.appB)));
      assert.deepEqual(await hs.leftovers(), []);
    } finally {
      await hs.close();
      await badRegistry.close();
    }
  });

  test('full disk while downloading: a clear reason and no partial download', async () => {
    const small = mkdtempSync(join(tmpdir(), 'tc-tmpfs-'));
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1024k', 'tmpfs', small], { encoding: 'utf8' });
    assert.equal(m.status, 0, m.stderr);
    const hs = await startHarness({ tc: { blobCacheDir: small } });
    try {
      const { r } = await build(hs, 'a');
      assert.equal(r.status, 'FAILED');
      // The cache's directory goes to the log, not into what the team reads.
      assert.equal(r.error, `no space left on device while downloading layer 1/3 ${digests.base1.slice(0, 19)}`);
      assert.deepEqual(await hs.leftovers(), []);
      assert.deepEqual(readdirSync(join(small, 'tmp')), []);
      assert.ok(!existsSync(cachedPath(hs, digests.base1)));
    } finally {
      await hs.close();
      spawnSync('umount', [small]);
      rmSync(small, { recursive: true, force: true });
    }
  });

  test('a cache limit of 0 keeps no blob once the build is done', async () => {
    const hs = await startHarness({ tc: { blobCacheMaxBytes: 0 } });
    try {
      const { r } = await build(hs, 'a');
      assert.equal(r.status, 'BUILT', r.error);
      assert.deepEqual(readdirSync(join(hs.blobCacheDir, 'sha256')), []);
    } finally {
      await hs.close();
    }
  });
});
