import { Readable } from 'node:stream';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { mountReadOnly } from '../test-support/ext4-mount.ts';
import { startHarness, type Harness } from '../test-support/harness.ts';
import { OciLayoutWriter } from '../test-support/oci-builder.ts';
import { startS3rver, S3RVER_CREDENTIALS, type TestS3rver } from '../test-support/s3rver.ts';
import { loadConfig, type SvcConfig } from '@svc/common';
import { s3OptionsOf } from './s3-env.ts';
import { S3ArtifactStore } from './s3-store.ts';

// The whole template center with its S3 store configured the way main.ts gets it, from the
// config as SVC_TEMPLATE_CENTER_S3_* set it, against a real s3rver on loopback (which does not verify SigV4
// signatures; see s3-store-s3rver.test.ts).

const WEEK = 7 * 24 * 3600;
const ENV: Record<string, string> = {
  REGION: 'us-east-1', BUCKET: 'artifacts', PREFIX: 'tc/', FORCE_PATH_STYLE: 'true',
  ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId, SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
  // 37 days (docs/templates.md) is more than S3 servers accept for a SigV4 presigned URL.
  PRESIGN_EXPIRES_SEC: String(WEEK),
};
let s3Config: SvcConfig['template_center']['s3'];
let s3: TestS3rver;
let h: Harness;
let scratch: string;
let layoutDir: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-s3-'));
  layoutDir = join(scratch, 'layout');
  const w = new OciLayoutWriter(layoutDir);
  await w.tag({
    layers: [
      { entries: [{ name: 'etc/', type: 'directory' }, { name: 'etc/os-release', content: 'ID=s3test\n' }] },
      { compression: 'zstd', entries: [{ name: 'srv/', type: 'directory' }, { name: 'srv/hello', content: 'from s3\n' }] },
    ],
  }, 'v1');
  await w.write();
  s3 = await startS3rver('artifacts');
  const env = Object.fromEntries(Object.entries({ ...ENV, ENDPOINT: s3.endpoint }).map(([k, v]) => [`SVC_TEMPLATE_CENTER_S3_${k}`, v]));
  s3Config = loadConfig({ env }).template_center.s3;
  h = await startHarness({ config: { s3: s3Config } });
});

after(async () => {
  await h?.close();
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('a template built into S3: 302 from the artifact route to the presigned URL, which serves the built image', async () => {
  assert.deepEqual(await (await fetch(`${h.tc.url}/health`)).json(), { ok: true, store: 's3' });
  const req = await h.submit({ kind: 'oci-layout', path: layoutDir, ref: 'v1' });
  const r = await h.master.final(req.jobId);
  assert.equal(r.status, 'BUILT', r.error);
  const art = r.artifact!;
  assert.equal(art.artifactId, req.artifactId);
  assert.equal(art.storage, 's3');
  assert.equal(art.location, `tc/${req.artifactId}.ext4`);
  assert.ok(await s3.exists(art.location));
  assert.ok(await s3.exists(`tc/${req.artifactId}.json`));
  const upload = s3.requests.find((q) => q.method === 'PUT' && q.url === `/artifacts/tc/${req.artifactId}.ext4`)!;
  assert.equal(upload.status, 200);
  assert.equal(upload.headers['x-amz-content-sha256'], art.sha256, 'signed with the image SHA-256');
  assert.equal(upload.headers['content-length'], String(art.sizeBytes));
  const url = new URL(art.downloadUrl!);
  assert.equal(url.origin + url.pathname, `${s3.endpoint}/artifacts/tc/${req.artifactId}.ext4`);
  assert.equal(url.searchParams.get('X-Amz-Expires'), String(WEEK));
  const lifetimeSec = (Date.parse(art.urlExpiresAt!) - Date.now()) / 1000;
  assert.ok(lifetimeSec > WEEK - 60 && lifetimeSec <= WEEK, `presigned lifetime ${lifetimeSec} s`);

  const redirect = await h.client.download(req.artifactId);
  assert.equal(redirect.status, 302);
  assert.equal(redirect.headers.get('location'), art.downloadUrl);
  await redirect.body?.cancel();
  const head = await h.client.download(req.artifactId, 'HEAD');
  assert.equal(head.status, 302);
  assert.equal(head.headers.get('location'), art.downloadUrl);

  // Following the redirect needs no credentials.
  const object = await fetch(redirect.headers.get('location')!);
  assert.equal(object.status, 200);
  const image = Buffer.from(await object.arrayBuffer());
  assert.equal(image.length, art.sizeBytes);
  assert.equal(createHash('sha256').update(image).digest('hex'), art.sha256);
  const file = join(scratch, 'downloaded.ext4');
  writeFileSync(file, image);
  const m = mountReadOnly(file);
  try {
    assert.equal(readFileSync(join(m.dir, 'srv/hello'), 'utf8'), 'from s3\n');
    assert.equal(readFileSync(join(m.dir, 'etc/os-release'), 'utf8'), 'ID=s3test\n');
  } finally {
    m.unmount();
  }

  // Another replica with the same configuration finds the record in the bucket.
  const replica = new S3ArtifactStore(s3OptionsOf(s3Config, join(scratch, 'replica'))!);
  assert.deepEqual(await replica.locate(req.artifactId), { kind: 'redirect', url: art.downloadUrl });

  assert.deepEqual(await h.client.deleteArtifact(req.artifactId), { deleted: true });
  assert.equal((await fetch(art.downloadUrl!)).status, 404);
  assert.equal(await s3.exists(art.location), false);
  assert.equal(await s3.exists(`tc/${req.artifactId}.json`), false);
  const missing = await h.client.download(req.artifactId);
  assert.equal(missing.status, 404);
  await missing.body?.cancel();
  assert.deepEqual(await h.client.deleteArtifact(req.artifactId), { deleted: false });

  const images = join(h.workDir, 'images');
  assert.deepEqual((await h.leftovers()).filter((p) => p !== images), []);
  assert.deepEqual(readdirSync(images), [], 'nothing left in the scratch dir');
});

test('a snapshot layer uploaded into S3: signed with its sha256, 302 to the presigned URL, another replica sees it stored, then gone', async () => {
  const layer = randomBytes(300 * 1024);
  const meta = { sha256: createHash('sha256').update(layer).digest('hex'), sizeBytes: layer.length };
  const stored = await h.client.putLayer('layer-s3', meta, Readable.from([layer]));
  assert.equal(stored.storage, 's3');
  assert.equal(stored.location, 'tc/layer-s3.ext4');
  assert.equal(stored.sha256, meta.sha256);
  const upload = s3.requests.find((q) => q.method === 'PUT' && q.url === '/artifacts/tc/layer-s3.ext4')!;
  assert.equal(upload.headers['x-amz-content-sha256'], meta.sha256);

  const redirect = await h.client.download('layer-s3');
  assert.equal(redirect.status, 302);
  await redirect.body?.cancel();
  const object = await fetch(redirect.headers.get('location')!);
  assert.ok(Buffer.from(await object.arrayBuffer()).equals(layer));

  const replica = new S3ArtifactStore(s3OptionsOf(s3Config, join(scratch, 'replica-layer'))!);
  assert.deepEqual(await replica.get('layer-s3'), stored);
  const puts = s3.requests.length;
  assert.deepEqual(await h.client.putLayer('layer-s3', meta, Readable.from([layer])), stored);
  assert.equal(s3.requests.slice(puts).filter((q) => q.method === 'PUT').length, 0, 'the same layer again uploads nothing');

  assert.deepEqual(await h.client.deleteArtifact('layer-s3'), { deleted: true });
  assert.equal(await replica.get('layer-s3'), null);
  assert.deepEqual(readdirSync(join(h.workDir, 'images')), [], 'nothing left in the scratch dir');
});

/**
 * With an S3 store no 0700 store directory holds the template center's scratch: its work
 * directory (staging trees, and the images and layer uploads of `images`) and its blob cache were
 * 0755 under a data directory anyone on the host could walk (found by a helper reading the
 * template center as an attacker). They are 0700 now, an existing one too.
 */
test('with an S3 store the work directory, its images and the blob cache are 0700, an existing one too', async () => {
  const workDir = join(scratch, 'existing-work');
  mkdirSync(workDir, { mode: 0o755 });
  chmodSync(workDir, 0o755);
  const hs = await startHarness({ config: { s3: s3Config }, workDir });
  try {
    for (const d of [workDir, join(workDir, 'images'), hs.blobCacheDir]) assert.equal(statSync(d).mode & 0o777, 0o700, d);
  } finally {
    await hs.close();
  }
});
