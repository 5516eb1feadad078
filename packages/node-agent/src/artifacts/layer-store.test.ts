import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type SvcError } from '@svc/common';
import { LayerNoRoom, LayerStore, LayerTooLarge } from './layer-store.ts';

const META = { artifactId: 'a1', contents: 'filesystem' as const, createdAt: new Date().toISOString() };

/** A store in a scratch directory that reports `free` bytes free. */
function storeWithFree(dir: string, free: number): LayerStore {
  const s = new LayerStore(dir, silentLogger());
  s.freeBytes = async () => free;
  return s;
}

test('load removes what a crash between add\'s renames (or remove\'s deletes) left: an archive without its description, a description without its archive, part files', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
  try {
    const kept = new LayerStore(dir, silentLogger());
    await kept.load();
    await kept.add('snap-kept', META, async (p) => writeFileSync(p, 'kept'));
    writeFileSync(join(dir, 'snap-aaaa.tar'), 'x'.repeat(1000)); // renamed; its .json.part never was
    writeFileSync(join(dir, 'snap-aaaa.json.part-123'), '{}');
    writeFileSync(join(dir, 'snap-bbbb.json'), JSON.stringify({ ...META, layerId: 'snap-bbbb', sha256: 'a'.repeat(64), sizeBytes: 1 }));
    writeFileSync(join(dir, 'snap-cccc.tar.part-9-9'), 'half');

    const s = new LayerStore(dir, silentLogger());
    await s.load();
    assert.deepEqual(s.list().map((l) => l.layerId), ['snap-kept']);
    assert.deepEqual(readdirSync(dir).sort(), ['snap-kept.json', 'snap-kept.tar']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a write that reaches its bound keeps nothing and says so (507)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
  try {
    const s = new LayerStore(dir, silentLogger());
    await s.load();
    // As tar under RLIMIT_FSIZE: the file stops at the bound and the command fails.
    const stopped = s.add('snap-big', META, async (p) => { writeFileSync(p, Buffer.alloc(4096)); throw new Error('tar: killed by SIGXFSZ'); }, { maxBytes: 4096 });
    await assert.rejects(stopped, (e: SvcError) => e instanceof LayerTooLarge && e.status === 507);
    // A writer that ignored its bound is refused as well.
    await assert.rejects(s.add('snap-over', META, async (p) => writeFileSync(p, Buffer.alloc(5000)), { maxBytes: 4096 }), LayerTooLarge);
    // Under the bound, an ordinary failure stays itself.
    await assert.rejects(s.add('snap-fail', META, async (p) => { writeFileSync(p, 'x'); throw new Error('tar: other'); }, { maxBytes: 4096 }), /tar: other/);
    assert.deepEqual(readdirSync(dir), []);
    assert.equal(s.list().length, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a write the full disk stopped keeps nothing and says so (507): ENOSPC, or tar\'s short write with no room left', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
  try {
    const s = storeWithFree(dir, 10 * 1024 * 1024);
    await s.load();
    const enospc = Object.assign(new Error('write failed'), { code: 'ENOSPC' });
    await assert.rejects(s.add('snap-a', META, async (p) => { writeFileSync(p, 'x'); throw enospc; }, { maxBytes: 4096 }), (e: SvcError) => e instanceof LayerNoRoom && e.status === 507);
    await assert.rejects(s.add('snap-b', META, async (p) => { writeFileSync(p, 'x'); throw new Error('tar: Cannot write: No space left on device'); }), LayerNoRoom);
    // tar may say only that it wrote less than it meant to: the disk, all but full, tells.
    s.freeBytes = async () => 4096;
    await assert.rejects(s.add('snap-c', META, async (p) => { writeFileSync(p, 'x'); throw new Error('tar: Wrote only 4096 of 10240 bytes'); }, { maxBytes: 1 << 20 }), LayerNoRoom);
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('room reserved by a write under way is not promised again; released, it is', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
  try {
    const s = storeWithFree(dir, 1000);
    await s.load();
    const first = await s.reserve(600, 'capture one');
    await assert.rejects(s.reserve(600, 'capture two'), (e: SvcError) => e.status === 507 && /less 600 that captures and downloads under way may still write/.test(e.message));
    first.release();
    first.release();
    (await s.reserve(600, 'capture two')).release();
    assert.equal(existsSync(dir), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a layer download that does not fit is a 503 before anything is fetched, so the master asks another node', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-layers-'));
  try {
    const s = storeWithFree(dir, 1000);
    await s.load();
    // Nothing listens there: a fetch would be a 502.
    const ref = { layerId: 'snap-dl', sha256: 'a'.repeat(64), sizeBytes: 5000, downloadUrl: 'http://127.0.0.1:1/layer' };
    await assert.rejects(s.ensure(ref, 'a1'), (e: SvcError) => e.status === 503 && /layer snap-dl may take up to 5000 bytes/.test(e.message));
    assert.deepEqual(readdirSync(dir), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
