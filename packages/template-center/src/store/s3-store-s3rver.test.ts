import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startS3rver, S3RVER_CREDENTIALS, type TestS3rver } from '../test-support/s3rver.ts';
import { S3ArtifactStore, type S3StoreOptions } from './s3-store.ts';

// The S3 store against a real S3-protocol server (s3rver) on loopback. s3rver 3.7.1 checks that a
// SigV4 request is well formed (known access key id, x-amz-content-sha256 present, x-amz-date
// within 15 minutes, presigned X-Amz-Expires at most 7 days and not past) but never computes the
// signature itself, so a wrong secret key goes through: sigv4.test.ts checks the signatures
// against AWS's published vectors instead.

const WEEK = 7 * 24 * 3600;
let s3: TestS3rver;
let scratch: string;
let n = 0;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-s3rver-test-'));
  s3 = await startS3rver('artifacts');
});

after(async () => {
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

function storeWith(o: Partial<S3StoreOptions> = {}): S3ArtifactStore {
  return new S3ArtifactStore({
    endpoint: s3.endpoint, region: 'us-east-1', bucket: s3.bucket, credentials: S3RVER_CREDENTIALS,
    prefix: 'tc/', presignExpiresSec: WEEK, scratchDir: join(scratch, `images-${++n}`), ...o,
  });
}

/** Random bytes with the ext4 superblock magic where the artifact routes look for it. */
function ext4Like(size = 256 * 1024): { path: string; data: Buffer; sha256: string } {
  const data = randomBytes(size);
  data.writeUInt16LE(0xef53, 1080);
  const path = join(scratch, `img-${++n}.ext4`);
  writeFileSync(path, data);
  return { path, data, sha256: createHash('sha256').update(data).digest('hex') };
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const fetchBytes = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
};

test('init makes the scratch dir; ready() is a HEAD of the bucket', async () => {
  const store = storeWith();
  await store.init();
  assert.ok(existsSync(store.scratchDir));
  const before = s3.requests.length;
  assert.equal(await store.ready(), true);
  const head = s3.requests.slice(before);
  assert.deepEqual(head.map((r) => `${r.method} ${r.url} ${r.status}`), ['HEAD /artifacts 200']);
  assert.match(String(head[0].headers.authorization), /^AWS4-HMAC-SHA256 Credential=S3RVER\/\d{8}\/us-east-1\/s3\/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/);
});

test('ready() is false when the bucket does not exist or the access key is unknown', async () => {
  assert.equal(await storeWith({ bucket: 'no-such-bucket' }).ready(), false);
  assert.equal(s3.requests.at(-1)!.status, 404);
  assert.equal(await storeWith({ credentials: { accessKeyId: 'NOBODY', secretAccessKey: 'S3RVER' } }).ready(), false);
  assert.equal(s3.requests.at(-1)!.status, 403);
  assert.equal(await storeWith({ endpoint: 'http://127.0.0.1:1' }).ready(), false, 'nothing listening');
});

test('put signs the upload with the content SHA-256; the presigned URL downloads the exact bytes without credentials', async () => {
  const store = storeWith();
  await store.init();
  const img = ext4Like();
  const before = s3.requests.length;
  const rec = await store.put('art-put', img.path, { sha256: img.sha256, sizeBytes: img.data.length }, { move: true });
  assert.equal(existsSync(img.path), false, 'move consumes the file');

  const puts = s3.requests.slice(before);
  assert.deepEqual(puts.map((r) => `${r.method} ${r.url} ${r.status}`), ['PUT /artifacts/tc/art-put.ext4 200', 'PUT /artifacts/tc/art-put.json 200']);
  assert.equal(puts[0].headers['x-amz-content-sha256'], img.sha256);
  // AWS refuses chunked PUTs without a length; s3rver would take them, so check what was sent.
  assert.equal(puts[0].headers['content-length'], String(img.data.length));
  assert.equal(puts[0].headers['transfer-encoding'], undefined);
  assert.equal(puts[1].headers['x-amz-content-sha256'], sha(Buffer.from(JSON.stringify(rec))));

  assert.equal(rec.storage, 's3');
  assert.equal(rec.location, 'tc/art-put.ext4');
  assert.equal(rec.sha256, img.sha256);
  assert.equal(rec.sizeBytes, img.data.length);
  const url = new URL(rec.downloadUrl!);
  assert.equal(url.origin + url.pathname, `${s3.endpoint}/artifacts/tc/art-put.ext4`, 'path-style');
  assert.equal(url.searchParams.get('X-Amz-Expires'), String(WEEK));
  assert.equal(Date.parse(rec.urlExpiresAt!) - Date.parse(isoOfAmzDate(url.searchParams.get('X-Amz-Date')!)), WEEK * 1000);

  const got = await fetchBytes(rec.downloadUrl!);
  assert.equal(got.status, 200);
  assert.ok(got.body.equals(img.data), 'the downloaded bytes are the uploaded ones');
  const last = s3.requests.at(-1)!;
  assert.equal(last.headers.authorization, undefined, 'a plain fetch, no credentials');
  assert.ok(await s3.exists('tc/art-put.ext4'));
  assert.ok(await s3.exists('tc/art-put.json'));
});

test('put without move leaves the file; a ranged GET of the presigned URL works', async () => {
  const store = storeWith();
  await store.init();
  const img = ext4Like(64 * 1024);
  const rec = await store.put('art-keep', img.path, { sha256: img.sha256, sizeBytes: img.data.length }, { move: false });
  assert.ok(readFileSync(img.path).equals(img.data));
  const res = await fetch(rec.downloadUrl!, { headers: { range: 'bytes=1080-1081' } });
  assert.equal(res.status, 206);
  assert.deepEqual([...Buffer.from(await res.arrayBuffer())], [0x53, 0xef]);
});

test('locate gives the recorded redirect, also to a store that reads the record from the bucket', async () => {
  const store = storeWith();
  await store.init();
  const img = ext4Like();
  const rec = await store.put('art-loc', img.path, { sha256: img.sha256, sizeBytes: img.data.length }, { move: true });
  assert.deepEqual(await store.locate('art-loc'), { kind: 'redirect', url: rec.downloadUrl });
  const replica = storeWith();
  const before = s3.requests.length;
  assert.deepEqual(await replica.locate('art-loc'), { kind: 'redirect', url: rec.downloadUrl });
  assert.deepEqual(s3.requests.slice(before).map((r) => `${r.method} ${r.url} ${r.status}`), ['GET /artifacts/tc/art-loc.json 200']);
  assert.equal(await replica.locate('art-never-built'), null);
});

test('delete removes the object and its record (the URL then 404s); a second delete is a no-op', async () => {
  const store = storeWith();
  await store.init();
  const img = ext4Like();
  const rec = await store.put('art-del', img.path, { sha256: img.sha256, sizeBytes: img.data.length }, { move: true });
  const replica = storeWith();
  assert.ok(await replica.locate('art-del'), 'the replica caches the record');

  assert.equal(await store.delete('art-del'), true);
  assert.equal(await s3.exists('tc/art-del.ext4'), false);
  assert.equal(await s3.exists('tc/art-del.json'), false);
  const gone = await fetch(rec.downloadUrl!);
  assert.equal(gone.status, 404);
  assert.match(await gone.text(), /<Code>NoSuchKey<\/Code>/);
  assert.equal(await store.locate('art-del'), null);

  assert.equal(await store.delete('art-del'), false);
  assert.equal(await replica.delete('art-del'), false, 'also from a replica that had the record cached');
  assert.equal(await replica.locate('art-del'), null);
  assert.equal(await store.delete('art-never-built'), false);
});

test('keys with characters that need encoding round-trip', async () => {
  const prefix = 'tc/with space+plus(1)~!/';
  const store = storeWith({ prefix });
  await store.init();
  const img = ext4Like(8 * 1024);
  const before = s3.requests.length;
  const rec = await store.put('art.enc_1-x', img.path, { sha256: img.sha256, sizeBytes: img.data.length }, { move: true });
  assert.equal(rec.location, `${prefix}art.enc_1-x.ext4`);
  // The path sent is the one signed: SigV4 encodes everything but A-Za-z0-9-._~ (and the slashes).
  const encoded = '/artifacts/tc/with%20space%2Bplus%281%29~%21/art.enc_1-x.ext4';
  assert.equal(s3.requests[before].url, encoded);
  assert.equal(new URL(rec.downloadUrl!).pathname, encoded);
  assert.ok(await s3.exists(`${prefix}art.enc_1-x.ext4`), 'stored under the literal key');
  assert.ok(await s3.exists(`${prefix}art.enc_1-x.json`));
  const got = await fetchBytes(rec.downloadUrl!);
  assert.equal(got.status, 200);
  assert.ok(got.body.equals(img.data));
  assert.deepEqual(await storeWith({ prefix }).locate('art.enc_1-x'), { kind: 'redirect', url: rec.downloadUrl });
  assert.equal(await store.delete('art.enc_1-x'), true);
  assert.equal(await s3.exists(`${prefix}art.enc_1-x.ext4`), false);
});

test('credentials: an unknown access key id is refused; a wrong secret key is not (s3rver does not verify SigV4 signatures)', async () => {
  const img = ext4Like(4096);
  const meta = { sha256: img.sha256, sizeBytes: img.data.length };
  const stranger = storeWith({ credentials: { accessKeyId: 'NOBODY', secretAccessKey: 'S3RVER' } });
  await stranger.init();
  await assert.rejects(stranger.put('art-cred', img.path, meta, { move: false }), /upload of art-cred failed: 403 InvalidAccessKeyId/);
  assert.equal(await s3.exists('tc/art-cred.ext4'), false);

  // Against AWS or MinIO this put fails with 403 SignatureDoesNotMatch.
  const wrongSecret = storeWith({ credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'not-the-secret' } });
  await wrongSecret.init();
  const rec = await wrongSecret.put('art-cred', img.path, meta, { move: false });
  assert.equal((await fetch(rec.downloadUrl!)).status, 200);
  assert.equal(await wrongSecret.delete('art-cred'), true);
});

test('presigned URLs: the 37-day default exceeds the 7 days S3 servers accept; an expired URL is refused', async () => {
  const img = ext4Like(4096);
  const meta = { sha256: img.sha256, sizeBytes: img.data.length };
  const spec = storeWith({ presignExpiresSec: undefined });
  await spec.init();
  const rec = await spec.put('art-37d', img.path, meta, { move: false });
  assert.equal(new URL(rec.downloadUrl!).searchParams.get('X-Amz-Expires'), String(37 * 24 * 3600));
  const refused = await fetch(rec.downloadUrl!);
  assert.equal(refused.status, 400);
  assert.match(await refused.text(), /<Code>AuthorizationQueryParametersError<\/Code>/);
  await spec.delete('art-37d');

  // X-Amz-Date drops the fraction of a second, so 2 s leave at least 1 s for the first fetch.
  const short = storeWith({ presignExpiresSec: 2 });
  await short.init();
  const brief = await short.put('art-2s', img.path, meta, { move: false });
  assert.equal((await fetch(brief.downloadUrl!)).status, 200);
  await new Promise((r) => setTimeout(r, Date.parse(brief.urlExpiresAt!) - Date.now() + 1100));
  const expired = await fetch(brief.downloadUrl!);
  assert.equal(expired.status, 403);
  assert.match(await expired.text(), /Request has expired/);
  await short.delete('art-2s');
});

function isoOfAmzDate(d: string): string {
  return `${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}T${d.slice(9, 11)}:${d.slice(11, 13)}:${d.slice(13, 15)}Z`;
}
