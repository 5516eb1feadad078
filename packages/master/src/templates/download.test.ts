import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withSqliteHarness } from './testing/engines.ts';
import type { Harness } from './testing/harness.ts';

const url = (id: string) => `/svc/template/artifact/download?artifact_id=${encodeURIComponent(id)}`;

async function builtArtifact(h: Harness): Promise<string> {
  await h.addNode('n1');
  const c = await h.create({ image: 'registry.example/a:1' });
  await h.finishBuild(c.job_id);
  return h.tc.lastBuild().artifactId;
}

test('artifact download through the master', async (t) => {
  await t.test('streams the template center\'s file with Content-Length; HEAD answers the length without a body', () =>
    withSqliteHarness({}, async (h) => {
      const id = await builtArtifact(h);
      const bytes = Buffer.from(`${'x'.repeat(200_000)} big ext4`);
      h.tc.files.set(id, bytes);
      const res = await fetch(h.url + url(id));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-length'), String(bytes.length));
      assert.equal(res.headers.get('content-type'), 'application/octet-stream');
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(bytes));
      const head = await fetch(h.url + url(id), { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-length'), String(bytes.length));
      assert.equal((await head.arrayBuffer()).byteLength, 0);
      assert.deepEqual(h.tc.downloads.slice(-2).map((d) => d.method), ['GET', 'HEAD']);
    }));

  await t.test('an S3 artifact with a presigned URL is a 302 to it; an expired URL goes to the template center', () =>
    withSqliteHarness({}, async (h) => {
      const id = await builtArtifact(h);
      const presigned = 'https://bucket.s3.example/artifacts/x.ext4?X-Amz-Signature=abc';
      await h.kysely.updateTable('t_svc_template_artifact')
        .set({ storage: 's3', download_url: presigned, url_expires_at: Date.now() + 37 * 86400_000 }).where('artifact_id', '=', id).execute();
      for (const method of ['GET', 'HEAD']) {
        const r = await h.call(method, url(id));
        assert.equal(r.status, 302, method);
        assert.equal(r.headers.get('location'), presigned);
      }
      const before = h.tc.downloads.length;
      await h.kysely.updateTable('t_svc_template_artifact').set({ url_expires_at: Date.now() - 1000 }).where('artifact_id', '=', id).execute();
      const r = await h.call('GET', url(id));
      assert.equal(r.status, 200);
      assert.equal(h.tc.downloads.length, before + 1);
    }));

  await t.test('a legacy artifact is served from the master\'s disk', () =>
    withSqliteHarness({}, async (h) => {
      const dir = mkdtempSync(join(tmpdir(), 'svc-legacy-'));
      try {
        const file = join(dir, 'old.ext4');
        const data = Buffer.from('legacy ext4 bytes');
        writeFileSync(file, data);
        const info = await h.module.service.registerLegacy({
          localPath: file, sha256: createHash('sha256').update(data).digest('hex'), sizeBytes: data.length,
        });
        const res = await fetch(h.url + url(info.artifact_id!));
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-length'), String(data.length));
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(data));
        const head = await fetch(h.url + url(info.artifact_id!), { method: 'HEAD' });
        assert.equal(head.headers.get('content-length'), String(data.length));
        assert.equal(h.tc.downloads.length, 0);
        rmSync(file);
        assert.equal((await h.call('GET', url(info.artifact_id!))).status, 404);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }));

  await t.test('missing id 400; unknown, unbuilt or vanished artifacts 404', () =>
    withSqliteHarness({}, async (h) => {
      assert.equal((await h.call('GET', '/svc/template/artifact/download')).status, 400);
      assert.equal((await h.call('GET', url('art-nope'), undefined, { 'x-svc-team': 'team-a' })).status, 403, 'a team\'s call, at the master too');
      const unknown = await h.call('GET', url('art-nope'));
      assert.equal(unknown.status, 404);
      assert.deepEqual(Object.keys(unknown.body).sort(), ['code', 'message']);
      await h.create({ image: 'registry.example/a:1' });
      const pending = h.tc.lastBuild().artifactId;
      const p = await h.call('GET', url(pending));
      assert.equal(p.status, 404);
      assert.match(p.body.message, /PENDING/);
      const id = await builtArtifact(h);
      h.tc.files.delete(id);
      assert.equal((await h.call('GET', url(id))).status, 404);
    }));
});
