/**
 * The contract of the template center's routes as the master uses them (build and its cancel, the
 * artifact's download and delete, a snapshot layer's upload, the token every route asks), as one test suite. The template center runs
 * it (packages/template-center/src/template-center.contract.test.ts, a real build) and so does the
 * master's FakeTemplateCenter (packages/master/src/templates/testing/fake-template-center.contract.test.ts).
 */
import { Readable } from 'node:stream';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statusOf } from './contract-testing.ts';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { TemplateCenterClient, type ArtifactStored, type BuildRequest } from './template-center.ts';

export interface TemplateCenterSubject {
  url: string;
  token: string;
  /** A build the subject can finish (a small root filesystem on its host). */
  buildRequest(): BuildRequest;
  /** The artifact the finished build reported to the master. */
  built(req: BuildRequest): Promise<ArtifactStored>;
  close(): Promise<void>;
}

export function templateCenterContract(name: string, make: () => Promise<TemplateCenterSubject>): void {
  test(`template center contract: ${name}`, async (t) => {
    const s = await make();
    const tc = new TemplateCenterClient(s.url, s.token);
    try {
      await t.test('health says ok and which store', async () => {
        const h = await tc.health();
        assert.equal(h.ok, true);
        assert.ok(h.store === 'local' || h.store === 's3');
      });

      await t.test('a wrong token is 401 on every /tc/api/v1 route', async () => {
        const wrong = new TemplateCenterClient(s.url, `${s.token}-not`);
        assert.equal(await statusOf(wrong.build(s.buildRequest())), 401);
        assert.equal(await statusOf(wrong.deleteArtifact('art-any')), 401);
        assert.equal(await statusOf(wrong.cancelBuild('job-any')), 401);
        assert.equal((await wrong.download('art-any')).status, 401);
        const bytes = randomBytes(1024);
        assert.equal(await statusOf(wrong.putLayer('layer-any', { sha256: sha256Of(bytes), sizeBytes: bytes.length }, streamOf(bytes))), 401);
      });

      await t.test('a cancel of a job it does not have answers cancelled: false', async () => {
        assert.deepEqual(await tc.cancelBuild(`job-${randomUUID()}`), { cancelled: false });
      });

      let artifact: ArtifactStored;
      await t.test('a build is accepted (202, its job id echoed) and reports its artifact', async () => {
        const req = s.buildRequest();
        assert.deepEqual(await tc.build(req), { jobId: req.jobId });
        artifact = await s.built(req);
        assert.equal(artifact.artifactId, req.artifactId);
        assert.match(artifact.sha256, /^[0-9a-f]{64}$/);
        assert.ok(artifact.sizeBytes > 0);
        assert.ok(artifact.storage === 'local' || artifact.storage === 's3');
      });

      await t.test('the artifact downloads whole (its sha256 and size), HEAD says its length', async () => {
        const res = await tc.download(artifact.artifactId);
        assert.equal(res.status, 200);
        const bytes = Buffer.from(await res.arrayBuffer());
        assert.equal(bytes.length, artifact.sizeBytes);
        assert.equal(createHash('sha256').update(bytes).digest('hex'), artifact.sha256);
        const head = await tc.download(artifact.artifactId, 'HEAD');
        assert.equal(head.status, 200);
        assert.equal(Number(head.headers.get('content-length')), artifact.sizeBytes);
        await head.body?.cancel();
      });

      await t.test('delete says whether it deleted; the artifact is then 404', async () => {
        assert.deepEqual(await tc.deleteArtifact(artifact.artifactId), { deleted: true });
        assert.deepEqual(await tc.deleteArtifact(artifact.artifactId), { deleted: false });
        const gone = await tc.download(artifact.artifactId);
        assert.equal(gone.status, 404);
        await gone.body?.cancel();
      });

      const layerId = `layer-${randomUUID().slice(0, 8)}`;
      const layer = randomBytes(200 * 1024);
      const layerMeta = { sha256: sha256Of(layer), sizeBytes: layer.length };
      let layerStored: ArtifactStored;
      await t.test('a layer upload is stored under its id (200, its sha256 and size)', async () => {
        layerStored = await tc.putLayer(layerId, layerMeta, streamOf(layer));
        assert.equal(layerStored.artifactId, layerId);
        assert.equal(layerStored.sha256, layerMeta.sha256);
        assert.equal(layerStored.sizeBytes, layer.length);
        assert.ok(layerStored.storage === 'local' || layerStored.storage === 's3');
      });

      await t.test('the stored layer downloads whole as an artifact does', async () => {
        const res = await tc.download(layerId);
        assert.equal(res.status, 200);
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(layer));
      });

      await t.test('artifactInfo tells what the store holds under an id, undefined when nothing', async () => {
        assert.deepEqual(await tc.artifactInfo(layerId), layerStored);
        assert.equal(await tc.artifactInfo(`layer-${randomUUID().slice(0, 8)}`), undefined);
      });

      await t.test('an upload without a sha256 (a build\'s context files) is stored with the one its bytes have', async () => {
        const id = `ctx-${randomUUID().slice(0, 8)}`;
        const bytes = randomBytes(4096);
        const stored = await tc.putLayer(id, { sizeBytes: bytes.length }, streamOf(bytes));
        assert.equal(stored.sha256, sha256Of(bytes));
        assert.equal(stored.sizeBytes, bytes.length);
        assert.deepEqual(await tc.deleteArtifact(id), { deleted: true });
      });

      await t.test('the same layer again is 200 with the same record', async () => {
        assert.deepEqual(await tc.putLayer(layerId, layerMeta, streamOf(layer)), layerStored);
      });

      await t.test('other bytes under a stored layer id are 409', async () => {
        const other = randomBytes(1024);
        assert.equal(await statusOf(tc.putLayer(layerId, { sha256: sha256Of(other), sizeBytes: other.length }, streamOf(other))), 409);
        const res = await tc.download(layerId);
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(layer), 'the stored layer is untouched');
      });

      await t.test('a layer whose bytes do not have its sha256 is 400 and nothing is kept', async () => {
        const id = `layer-${randomUUID().slice(0, 8)}`;
        const bytes = randomBytes(64 * 1024);
        assert.equal(await statusOf(tc.putLayer(id, { sha256: sha256Of(Buffer.from('other')), sizeBytes: bytes.length }, streamOf(bytes))), 400);
        assert.equal(await statusOf(tc.putLayer(id, { sha256: 'not-a-sha256', sizeBytes: bytes.length }, streamOf(bytes))), 400);
        const gone = await tc.download(id);
        assert.equal(gone.status, 404);
        await gone.body?.cancel();
      });

      await t.test('a stored layer deletes as an artifact does; it is then 404', async () => {
        assert.deepEqual(await tc.deleteArtifact(layerId), { deleted: true });
        const gone = await tc.download(layerId);
        assert.equal(gone.status, 404);
        await gone.body?.cancel();
      });
    } finally {
      await s.close();
    }
  });
}

const sha256Of = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const streamOf = (b: Buffer) => Readable.from([b]);
