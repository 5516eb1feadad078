import { Readable } from 'node:stream';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createHttpApp, silentLogger, type SvcError } from '@svc/common';
import { LAYER_SHA256_HEADER, TemplateCenterClient } from '@svc/contracts/template-center';
import { LAYER_ROOM_MARGIN, registerLayerRoutes, type LayerRouteOptions } from './layer-routes.ts';
import type { ArtifactStore } from './store/artifact-store.ts';
import { LocalArtifactStore } from './store/local-store.ts';

// What the contract suite (template-center.contract.ts) cannot reach: the room checks, a client
// that goes away or stalls mid-body, a body without a content-length, concurrent uploads of one id.

let scratch: string;
let n = 0;

before(() => { scratch = mkdtempSync(join(tmpdir(), 'tc-layer-test-')); });
after(() => rmSync(scratch, { recursive: true, force: true }));

async function serve(opts: LayerRouteOptions & { dir?: string; store?: (dir: string) => ArtifactStore } = {}) {
  const dir = opts.dir ?? join(scratch, `store-${++n}`);
  const store = opts.store?.(dir) ?? new LocalArtifactStore(dir);
  await store.init();
  const app = createHttpApp({ logger: silentLogger() });
  await registerLayerRoutes(app, store, opts);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  return { url, store, client: new TemplateCenterClient(url, ''), close: () => app.close() };
}

const layerOf = (size: number) => {
  const data = randomBytes(size);
  return { data, meta: { sha256: createHash('sha256').update(data).digest('hex'), sizeBytes: size } };
};
const streamOf = (b: Buffer) => Readable.from([b]);
const errorOf = (p: Promise<unknown>) => p.then(() => assert.fail('expected an error'), (e: SvcError) => e);

async function until(cond: () => boolean, what: string, ms = 5_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('too little free room is 507 before the body is read, naming the bytes needed and free', async () => {
  const s = await serve({ freeBytes: async () => 5_000 });
  try {
    const { data, meta } = layerOf(100_000);
    const err = await errorOf(s.client.putLayer('layer-big', meta, streamOf(data)));
    assert.equal(err.status, 507);
    assert.match(err.message, new RegExp(`needs ${100_000 + LAYER_ROOM_MARGIN} bytes .*5000 are free`));
    assert.equal(await s.store.get('layer-big'), null);
    assert.deepEqual(readdirSync(s.store.scratchDir), []);
  } finally {
    await s.close();
  }
});

test('a layer above the store\'s single-upload limit (the s3 store\'s 5 GiB) is 507 before the body is read', async () => {
  const s = await serve({ store: (dir) => Object.assign(new LocalArtifactStore(dir), { maxArtifactBytes: 1_000 }) });
  try {
    const { data, meta } = layerOf(2_000);
    const err = await errorOf(s.client.putLayer('layer-over', meta, streamOf(data)));
    assert.equal(err.status, 507);
    assert.match(err.message, /2000 bytes exceeds the 1000 bytes/);
  } finally {
    await s.close();
  }
});

test('a full disk mid-upload is 507, the answer reaches the client and nothing is left', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tc-layer-tmpfs-'));
  const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1024k', 'tmpfs', dir], { encoding: 'utf8' });
  assert.equal(mount.status, 0, mount.stderr);
  // The free-room check is told there is room, so the write itself runs out.
  const s = await serve({ dir, freeBytes: async () => Number.MAX_SAFE_INTEGER });
  try {
    const { data, meta } = layerOf(4 * 1024 * 1024);
    const err = await errorOf(s.client.putLayer('layer-full', meta, streamOf(data)));
    assert.equal(err.status, 507, err.message);
    assert.match(err.message, /no room for layer layer-full/);
    assert.deepEqual(readdirSync(s.store.scratchDir), []);
    assert.equal(await s.store.get('layer-full'), null);
  } finally {
    await s.close();
    spawnSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * The free room seen by a check does not yet show what uploads under way will still write: ten
 * uploads started together each passed the check the room of one passed (found by a helper
 * reading the template center as an attacker). What they still have to write is taken from it,
 * and given back as they write it, or when they end. The part file is its owner's alone.
 */
test('uploads under way are counted against the free room: a second that does not fit beside the first is 507; the room comes back when the first ends', async () => {
  const SIZE = 1024 * 1024;
  // Room for one upload and its margin, not two.
  const s = await serve({ freeBytes: async () => SIZE + LAYER_ROOM_MARGIN + SIZE / 2 });
  try {
    const first = layerOf(SIZE);
    const port = Number(new URL(s.url).port);
    const req = request({
      host: '127.0.0.1', port, method: 'PUT', path: '/tc/api/v1/layer/layer-first',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(SIZE), [LAYER_SHA256_HEADER]: first.meta.sha256 },
    });
    const answered = new Promise<number>((resolve, reject) => { req.on('response', (res) => { res.resume(); resolve(res.statusCode!); }); req.on('error', reject); });
    req.write(first.data.subarray(0, 64 * 1024));
    await until(() => readdirSync(s.store.scratchDir).some((f) => f.startsWith('layer-layer-first.part-')), 'the part file');
    const part = readdirSync(s.store.scratchDir).find((f) => f.startsWith('layer-layer-first.part-'))!;
    assert.equal(statSync(join(s.store.scratchDir, part)).mode & 0o777, 0o600);

    const second = layerOf(SIZE);
    const err = await errorOf(s.client.putLayer('layer-second', second.meta, streamOf(second.data)));
    assert.equal(err.status, 507);
    const promised = Number(/, less (\d+) that uploads under way will still write$/.exec(err.message)?.[1]);
    assert.match(err.message, new RegExp(`^no room for layer layer-second: it needs ${SIZE + LAYER_ROOM_MARGIN} bytes `));
    assert.ok(promised >= SIZE - 64 * 1024 && promised <= SIZE, `${promised} bytes still to write: what the first has not sent`);

    req.end(first.data.subarray(64 * 1024));
    assert.equal(await answered, 200);
    assert.equal((await s.client.putLayer('layer-second', second.meta, streamOf(second.data))).sha256, second.meta.sha256, 'the room is back');
  } finally {
    await s.close();
  }
});

test('a client that goes away mid-body leaves no part file, and the server goes on', async () => {
  const s = await serve();
  try {
    const { data, meta } = layerOf(1024 * 1024);
    const port = Number(new URL(s.url).port);
    const req = request({
      host: '127.0.0.1', port, method: 'PUT', path: '/tc/api/v1/layer/layer-cut',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(meta.sizeBytes), [LAYER_SHA256_HEADER]: meta.sha256 },
    });
    req.on('error', () => { /* destroyed below on purpose */ });
    req.write(data.subarray(0, 256 * 1024));
    await until(() => readdirSync(s.store.scratchDir).some((f) => f.startsWith('layer-layer-cut.part-')), 'the part file');
    req.destroy();
    await until(() => readdirSync(s.store.scratchDir).length === 0, 'the part file to go');
    assert.equal(await s.store.get('layer-cut'), null);

    const whole = await s.client.putLayer('layer-cut', meta, streamOf(data));
    assert.equal(whole.sha256, meta.sha256);
  } finally {
    await s.close();
  }
});

test('a client that stops sending without closing is given up after the idle timeout; nothing is left', async () => {
  const s = await serve({ idleTimeoutMs: 300 });
  try {
    const { data, meta } = layerOf(1024 * 1024);
    const port = Number(new URL(s.url).port);
    const req = request({
      host: '127.0.0.1', port, method: 'PUT', path: '/tc/api/v1/layer/layer-stalled',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(meta.sizeBytes), [LAYER_SHA256_HEADER]: meta.sha256 },
    });
    const closed = new Promise<void>((resolve) => { req.on('error', () => resolve()); req.on('close', () => resolve()); });
    req.write(data.subarray(0, 256 * 1024));
    await until(() => readdirSync(s.store.scratchDir).some((f) => f.startsWith('layer-layer-stalled.part-')), 'the part file');
    await closed;
    await until(() => readdirSync(s.store.scratchDir).length === 0, 'the part file to go');
    assert.equal(await s.store.get('layer-stalled'), null);
  } finally {
    await s.close();
  }
});

test('a body without content-length (chunked) is 400', async () => {
  const s = await serve();
  try {
    const { data, meta } = layerOf(10_000);
    const port = Number(new URL(s.url).port);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({
        host: '127.0.0.1', port, method: 'PUT', path: '/tc/api/v1/layer/layer-chunked',
        headers: { 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked', [LAYER_SHA256_HEADER]: meta.sha256 },
      }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => { body += c; });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.end(data);
    });
    assert.equal(answer.status, 400);
    assert.match(answer.body, /content-length is required/);
  } finally {
    await s.close();
  }
});

test('concurrent uploads of one id: the same bytes are both 200, other bytes 409', async () => {
  const s = await serve();
  try {
    const a = layerOf(300 * 1024);
    const [one, two] = await Promise.all([
      s.client.putLayer('layer-twice', a.meta, streamOf(a.data)),
      s.client.putLayer('layer-twice', a.meta, streamOf(a.data)),
    ]);
    assert.deepEqual(one, two);

    const b = layerOf(300 * 1024);
    const c = layerOf(300 * 1024);
    const results = await Promise.allSettled([
      s.client.putLayer('layer-race', b.meta, streamOf(b.data)),
      s.client.putLayer('layer-race', c.meta, streamOf(c.data)),
    ]);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    assert.equal(won.length, 1, 'the first to arrive is stored');
    assert.equal((lost[0].reason as SvcError).status, 409);
    assert.equal((await s.store.get('layer-race'))?.sha256, won[0].value.sha256);
    assert.deepEqual(readdirSync(s.store.scratchDir), []);
  } finally {
    await s.close();
  }
});

test('a build\'s context files come without a sha256: stored with the one their bytes have; the first upload of an id stays', async () => {
  const s = await serve();
  try {
    const { data, meta } = layerOf(5_000);
    const stored = await s.client.putLayer('ctx-files', { sizeBytes: meta.sizeBytes }, streamOf(data));
    assert.equal(stored.sha256, meta.sha256);
    assert.equal(stored.sizeBytes, 5_000);
    const other = layerOf(100);
    assert.equal((await s.client.putLayer('ctx-files', { sizeBytes: 100 }, streamOf(other.data))).sha256, meta.sha256, 'the same id again keeps what it holds');
    assert.equal((await errorOf(s.client.putLayer('ctx-short', { sizeBytes: 10 }, streamOf(other.data)))).status, 400, 'more bytes than content-length said');
  } finally {
    await s.close();
  }
});
