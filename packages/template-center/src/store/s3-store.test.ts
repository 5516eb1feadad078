import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { compress, tarOf } from '../test-support/oci-builder.ts';
import { startFakeS3, type FakeS3 } from '../test-support/fake-s3.ts';
import { startHarness, type Harness } from '../test-support/harness.ts';

// No S3 server is available here: this runs the store's request flow against an in-memory stand-in.
const credentials = { accessKeyId: 'AKIDTEST', secretAccessKey: 'test-secret-key' };
let s3: FakeS3;
let h: Harness;
let scratch: string;

before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tc-s3-'));
  s3 = await startFakeS3('artifacts', 'eu-test-1', credentials);
  h = await startHarness({ tc: { s3: { endpoint: s3.endpoint, region: 'eu-test-1', bucket: 'artifacts', credentials, prefix: 'tc/', scratchDir: join(scratch, 'images') } } });
});

after(async () => {
  await h?.close();
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('S3 store: upload, presigned URL recorded for 37 days, 302 from the artifact route, delete', async () => {
  assert.deepEqual(await (await fetch(`${h.tc.url}/health`)).json(), { ok: true, store: 's3' });
  const tarball = join(scratch, 'rootfs.tar.gz');
  writeFileSync(tarball, compress(await tarOf([{ name: 'hello', content: 'world' }]), 'gzip'));
  const req = await h.submit({ kind: 'rootfs-tar', path: tarball });
  const r = await h.master.final(req.jobId);
  assert.equal(r.status, 'BUILT', r.error);
  const art = r.artifact!;
  assert.equal(art.storage, 's3');
  assert.equal(art.location, `tc/${req.artifactId}.ext4`);
  const stored = s3.objects.get(art.location)!;
  assert.equal(createHash('sha256').update(stored).digest('hex'), art.sha256);
  assert.ok(s3.objects.has(`tc/${req.artifactId}.json`));
  const lifetimeDays = (Date.parse(art.urlExpiresAt!) - Date.now()) / 86400_000;
  assert.ok(lifetimeDays > 36.9 && lifetimeDays <= 37, `presigned lifetime ${lifetimeDays}`);
  assert.equal(new URL(art.downloadUrl!).searchParams.get('X-Amz-Expires'), String(37 * 24 * 3600));

  const redirect = await h.client.download(req.artifactId);
  assert.equal(redirect.status, 302, 'the token is not sent on to the object store');
  assert.equal(redirect.headers.get('location'), art.downloadUrl);
  const object = await fetch(art.downloadUrl!);
  assert.equal(object.status, 200, 'the stand-in accepts the presigned signature');
  assert.equal(createHash('sha256').update(Buffer.from(await object.arrayBuffer())).digest('hex'), art.sha256);

  assert.deepEqual(await h.client.deleteArtifact(req.artifactId), { deleted: true });
  assert.deepEqual(await h.client.deleteArtifact(req.artifactId), { deleted: false });
  assert.equal(s3.objects.size, 0);
  assert.deepEqual(s3.rejected, []);
  assert.deepEqual(await h.leftovers(), []);
});
