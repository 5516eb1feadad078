/**
 * The contract of the template center's routes as the master uses them (build, the artifact's
 * download and delete, the token every route asks), as one test suite. The template center runs
 * it (packages/template-center/src/template-center.contract.test.ts, a real build) and so does the
 * master's FakeTemplateCenter (packages/master/src/templates/testing/fake-template-center.contract.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statusOf } from './contract-testing.ts';
import { createHash } from 'node:crypto';
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
        assert.equal((await wrong.download('art-any')).status, 401);
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
    } finally {
      await s.close();
    }
  });
}
