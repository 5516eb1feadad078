import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { ImageSourceError } from '../image/resolved-image.ts';
import { DigestMismatchError } from '../layers/layer-blob.ts';
import { BlobCache, type BlobRequest } from './blob-cache.ts';

const dirs: string[] = [];
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

async function newCache(maxBytes = 1 << 30) {
  const dir = mkdtempSync(join(tmpdir(), 'tc-blobs-'));
  dirs.push(dir);
  const cache = new BlobCache({ dir, maxBytes, logger: silentLogger() });
  await cache.init();
  return cache;
}

const digestOf = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** A blob source that counts how often it is opened and sends `data` in 64 KiB pieces. */
function source(data: Buffer, o: { digest?: string; size?: number; stall?: boolean } = {}) {
  const counts = { opens: 0, bytes: 0 };
  const req = (signal = new AbortController().signal): BlobRequest => ({
    digest: o.digest ?? digestOf(data),
    size: o.size ?? data.length,
    label: o.digest ?? digestOf(data),
    signal,
    onBytes: (n) => { counts.bytes += n; },
    open: async () => {
      counts.opens++;
      return Readable.from((async function* () {
        for (let off = 0; off < data.length; off += 65536) {
          yield data.subarray(off, off + 65536);
          if (o.stall && off >= 65536) await new Promise(() => {});
        }
      })());
    },
  });
  return { req, counts };
}

const tmpFiles = (c: BlobCache) => readdirSync(join(c.dir, 'tmp'));

test('a blob is downloaded once, verified, and found again', async () => {
  const cache = await newCache();
  const data = randomBytes(300_000);
  const s = source(data);
  const lease = cache.lease();
  const first = await cache.fetch(s.req(), lease);
  assert.deepEqual([first.hit, s.counts.opens, s.counts.bytes], [false, 1, data.length]);
  assert.deepEqual(readFileSync(first.path), data);
  assert.equal(first.path, join(cache.dir, 'sha256', digestOf(data).slice(7)));
  const second = await cache.fetch(s.req(), lease);
  assert.deepEqual([second.hit, second.path, s.counts.opens, s.counts.bytes], [true, first.path, 1, 2 * data.length]);
  await lease.release();
  assert.deepEqual(tmpFiles(cache), []);
});

test('a damaged or truncated cached blob is deleted and downloaded again', async () => {
  const cache = await newCache();
  const data = randomBytes(200_000);
  const s = source(data);
  const lease = cache.lease();
  const { path } = await cache.fetch(s.req(), lease);
  const bad = Buffer.from(data);
  bad[1234] ^= 0xff;
  writeFileSync(path, bad);
  const again = await cache.fetch(s.req(), lease);
  assert.deepEqual([again.hit, s.counts.opens], [false, 2]);
  assert.deepEqual(readFileSync(path), data);
  writeFileSync(path, data.subarray(0, 1000));
  assert.equal((await cache.fetch(s.req(), lease)).hit, false);
  assert.equal(s.counts.opens, 3);
  assert.deepEqual(readFileSync(path), data);
  await lease.release();
});

test('a download that does not match its digest fails and leaves no file', async () => {
  const cache = await newCache();
  const data = randomBytes(200_000);
  const wrong = source(data, { digest: digestOf(Buffer.from('something else')) });
  const lease = cache.lease();
  await assert.rejects(cache.fetch(wrong.req(), lease), (e: Error) => e instanceof DigestMismatchError && /digest mismatch: content hashes to sha256:/.test(e.message));
  const tooBig = source(data, { size: 1000 });
  await assert.rejects(cache.fetch(tooBig.req(), lease), /larger than its manifest says \(1000 bytes\): digest mismatch/);
  const tooSmall = source(data, { size: data.length + 1 });
  await assert.rejects(cache.fetch(tooSmall.req(), lease), /digest mismatch: got 200000 bytes, manifest says 200001/);
  await lease.release();
  assert.deepEqual(await cache.list(), []);
  assert.deepEqual(tmpFiles(cache), []);
});

test('an aborted download leaves no partial file', async () => {
  const cache = await newCache();
  const s = source(randomBytes(1_000_000), { stall: true });
  const ctl = new AbortController();
  const lease = cache.lease();
  const p = cache.fetch(s.req(ctl.signal), lease);
  for (let i = 0; s.counts.bytes < 65536 * 2; i++) {
    assert.ok(i < 200, 'the download did not start');
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(tmpFiles(cache).length, 1, 'the partial download sits in tmp');
  ctl.abort(new Error('stop now'));
  await assert.rejects(p, /stop now/);
  await lease.release();
  assert.deepEqual(tmpFiles(cache), []);
  assert.deepEqual(await cache.list(), []);
});

test('digests that are not sha256/sha512 never become paths', async () => {
  const cache = await newCache();
  const lease = cache.lease();
  for (const digest of ['sha256:../../etc/passwd', 'md5:abc', `sha256:${'A'.repeat(64)}`]) {
    await assert.rejects(cache.fetch({ ...source(Buffer.from('x')).req(), digest }, lease), ImageSourceError);
  }
  await lease.release();
});

test('over its limit the cache drops least recently used blobs that no build holds', async () => {
  const cache = await newCache(250_000);
  const blobs = [randomBytes(100_000), randomBytes(100_000), randomBytes(100_000)].map((d) => source(d));
  const lease = cache.lease();
  const paths: string[] = [];
  for (const b of blobs) paths.push((await cache.fetch(b.req(), lease)).path);
  assert.equal((await cache.list()).length, 3, 'held blobs stay while the build runs, over the limit or not');
  // Make the order of use explicit: blob 1 oldest, then 0, then 2.
  utimesSync(paths[1], new Date(1_000_000), new Date(1_000_000));
  utimesSync(paths[0], new Date(2_000_000), new Date(2_000_000));
  await lease.release();
  assert.deepEqual((await cache.list()).map((b) => b.digest).sort(), [blobs[0], blobs[2]].map((b) => b.req().digest).sort());

  // A hit marks the blob used: blob 0 becomes the newest, blob 2 the one to go.
  const next = cache.lease();
  assert.equal((await cache.fetch(blobs[0].req(), next)).hit, true);
  assert.ok(statSync(paths[0]).mtimeMs > Date.now() - 60_000);
  await cache.fetch(blobs[1].req(), next);
  await next.release();
  assert.ok(existsSync(paths[0]) && existsSync(paths[1]) && !existsSync(paths[2]));
});

test('init removes partial downloads of an earlier process and trims', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tc-blobs-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  writeFileSync(join(dir, 'tmp', 'abc.123.partial'), 'half');
  mkdirSync(join(dir, 'sha256'));
  writeFileSync(join(dir, 'sha256', 'f'.repeat(64)), Buffer.alloc(1000));
  const cache = new BlobCache({ dir, maxBytes: 500, logger: silentLogger() });
  await cache.init();
  assert.deepEqual(readdirSync(join(dir, 'tmp')), []);
  assert.deepEqual(await cache.list(), []);
});

test('a blob pulled with credentials (a scope) is handed only to requests of the same scope; one without is anyone\'s', async () => {
  const cache = await newCache();
  const data = randomBytes(200_000);
  const s = source(data);
  const lease = cache.lease();
  const teamA = await cache.fetch({ ...s.req(), scope: 'login-of-team-a' }, lease);
  assert.deepEqual([teamA.hit, s.counts.opens], [false, 1]);
  assert.notEqual(teamA.path, join(cache.dir, 'sha256', digestOf(data).slice(7)), 'kept apart from the digest\'s shared place');
  assert.deepEqual(readFileSync(teamA.path), data, 'the content is the blob\'s, checked against its own digest');
  // Another team naming the same digest (in a manifest of its own registry): downloaded from its source, not handed team A's copy.
  const other = await cache.fetch({ ...s.req(), scope: 'login-of-team-b' }, lease);
  const anonymous = await cache.fetch(s.req(), lease);
  assert.deepEqual([other.hit, anonymous.hit, s.counts.opens], [false, false, 3]);
  assert.equal(new Set([teamA.path, other.path, anonymous.path]).size, 3);
  // The same login hits its copy, and the anonymous copy is anyone's.
  assert.equal((await cache.fetch({ ...s.req(), scope: 'login-of-team-a' }, lease)).hit, true);
  assert.equal((await cache.fetch(s.req(), lease)).hit, true);
  assert.equal(s.counts.opens, 3);
  await lease.release();
  assert.equal((await cache.list()).length, 3, 'every copy is listed, so eviction sees it');
});

test('a request without a valid size is refused before its source is opened: nothing would bound the download', async () => {
  const cache = await newCache();
  const data = randomBytes(1000);
  for (const size of [undefined, -1, 1.5, '1000', Number.MAX_SAFE_INTEGER + 2]) {
    const s = source(data);
    const req = { ...s.req(), size: size as number };
    await assert.rejects(cache.fetch(req, cache.lease()), (e: Error) => e instanceof ImageSourceError && /has no valid size/.test(e.message), String(size));
    assert.equal(s.counts.opens, 0, String(size));
  }
});

/**
 * Teams' layers, private ones among them, wait in the cache between builds: its directory is
 * 0700 (an existing one is made so) and the blobs 0600, whatever the store. With an S3 store no
 * 0700 store directory held it, and it was 0755 (found by a helper reading the template center
 * as an attacker).
 */
test('the cache is its owner\'s alone: directories 0700, an existing one too, and blobs 0600', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tc-blobs-mode-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'cache'), { mode: 0o755 });
  const cache = new BlobCache({ dir: join(dir, 'cache'), maxBytes: 1 << 30, logger: silentLogger() });
  await cache.init();
  const { path } = await cache.fetch(source(randomBytes(1000)).req(), cache.lease());
  for (const d of [cache.dir, join(cache.dir, 'tmp'), join(cache.dir, 'sha256')]) assert.equal(statSync(d).mode & 0o777, 0o700, d);
  assert.equal(statSync(path).mode & 0o777, 0o600);
});
