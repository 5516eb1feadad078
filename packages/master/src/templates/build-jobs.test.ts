import assert from 'node:assert/strict';
import { progressKey } from '@svc/contracts/template-center';
import { onEveryEngine } from './testing/engines.ts';
import type { Harness } from './testing/harness.ts';

const IMAGE = { image: 'registry.example/library/alpine:3.20' };

async function job(h: Harness, jobId: string) {
  const r = await h.call('GET', `/svc/template/build/${jobId}/status`);
  assert.equal(r.status, 200);
  return r.body;
}
async function template(h: Harness, ref: string) {
  const r = await h.call('GET', `/svc/template/${ref}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}
async function setProgressClock(h: Harness, jobId: string, at: number) {
  await h.kysely.updateTable('t_svc_template_job').set({ last_progress_at: at }).where('job_id', '=', jobId).execute();
}

onEveryEngine('template build jobs', {
  'submit → PENDING → RUNNING phases → BUILT → register, distribute, finalize': async (h) => {
    const n1 = await h.addNode('n1');
    const n2 = await h.addNode('n2');
    const created = await h.create({ ...IMAGE, alias: 'alpine', platform: 'linux/arm64', cpu_count: 2, memory_mb: 1024 });
    assert.match(created.template_id, /^tpl-/);
    assert.equal(created.status, 'PENDING');

    const req = h.tc.lastBuild();
    assert.equal(req.jobId, created.job_id);
    assert.equal(req.templateId, created.template_id);
    assert.match(req.artifactId, /^art-/);
    assert.match(req.specHash, /^[0-9a-f]{64}$/);
    assert.deepEqual(req.source, { kind: 'registry', ref: IMAGE.image, platform: { os: 'linux', architecture: 'arm64' } });
    assert.equal(req.withSvcCa, true);
    assert.equal(req.diskSizeMB, 0);

    let info = await job(h, created.job_id);
    assert.equal(info.status, 'PENDING');
    assert.equal(info.kind, 'CREATE');
    assert.equal((await template(h, 'alpine')).status, 'building');

    for (const phase of ['PULLING', 'BUILDING', 'UPLOADING']) {
      assert.equal(await h.tc.callback(h.url, created.job_id, { status: 'RUNNING', phase: phase as never }), 204);
      info = await job(h, created.job_id);
      assert.equal(info.status, 'RUNNING');
      assert.equal(info.phase, phase);
    }
    // Live progress comes from the coordination store.
    await h.coordination.kvSet(progressKey(created.job_id), JSON.stringify({
      jobId: created.job_id, phase: 'UPLOADING', layers: [{ digest: 'sha256:aa', totalBytes: 10, doneBytes: 4 }],
      message: 'uploading', updatedAt: new Date().toISOString(),
    }));
    info = await job(h, created.job_id);
    assert.deepEqual(info.progress, { layers: [{ digest: 'sha256:aa', total_bytes: 10, done_bytes: 4 }], message: 'uploading' });
    assert.equal((await h.rows('t_svc_template_artifact'))[0].status, 'BUILDING');

    const artifact = h.tc.storeArtifact(req.artifactId);
    assert.equal(await h.tc.callback(h.url, created.job_id, { status: 'BUILT', artifact, imageInfo: { layers: 3, sizeBytes: 99, os: 'linux', architecture: 'arm64' } }), 204);
    await h.module.settled();

    info = await job(h, created.job_id);
    assert.equal(info.status, 'BUILT');
    assert.equal(info.phase, 'DISTRIBUTING');
    assert.ok(info.finished_at);
    assert.equal(info.artifact_id, req.artifactId);
    const tpl = await template(h, created.template_id);
    assert.equal(tpl.status, 'ready');
    assert.equal(tpl.alias, 'alpine');
    assert.equal(tpl.artifact_id, req.artifactId);
    assert.equal(tpl.latest_job_id, created.job_id);
    assert.equal(tpl.image_info.layers, 3);
    assert.equal(tpl.cpu_count, 2);
    assert.equal(tpl.memory_mb, 1024);
    assert.equal(tpl.error, null);
    // Both nodes downloaded it through the master's download route and verified the sha256.
    assert.ok(n1.artifacts.has(req.artifactId) && n2.artifacts.has(req.artifactId));
    assert.deepEqual((await h.rows('t_svc_template_placement')).map((p) => [p.node_id, p.status]).sort(), [['n1', 'READY'], ['n2', 'READY']]);
    const defs = await h.rows('t_svc_template_definition');
    assert.deepEqual(defs.map((d) => [d.template_id, d.artifact_id, d.superseded_at]), [[created.template_id, req.artifactId, null]]);
    const [a] = await h.rows('t_svc_template_artifact');
    assert.equal(a.status, 'READY');
    assert.equal(a.sha256, artifact.sha256);
    // The spec slot is free again.
    assert.ok((await h.rows('t_svc_template_job')).every((j) => j.active_spec_hash === null));

    const resolved = await h.module.resolver.resolveForCreate('alpine');
    assert.equal(resolved.templateId, created.template_id);
    assert.equal(resolved.artifact.downloadUrl, `${h.url}/svc/template/artifact/download?artifact_id=${req.artifactId}`);
    assert.equal(resolved.artifact.sha256, artifact.sha256);
    assert.equal(resolved.cpuCount, 2);

    // A repeated BUILT callback changes nothing.
    assert.equal(await h.tc.callback(h.url, created.job_id, { status: 'BUILT', artifact }), 204);
    await h.module.settled();
    assert.equal((await job(h, created.job_id)).status, 'BUILT');
  },

  'RUNNING → FAILED: the reason is recorded, the template is failed': async (h) => {
    await h.addNode('n1');
    const c = await h.create(IMAGE);
    await h.tc.callback(h.url, c.job_id, { status: 'RUNNING', phase: 'PULLING' });
    assert.equal(await h.tc.callback(h.url, c.job_id, { status: 'FAILED', error: 'manifest unknown: alpine:3.20' }), 204);
    const info = await job(h, c.job_id);
    assert.equal(info.status, 'FAILED');
    assert.equal(info.error, 'manifest unknown: alpine:3.20');
    assert.ok(info.finished_at);
    const tpl = await template(h, c.template_id);
    assert.equal(tpl.status, 'failed');
    assert.equal(tpl.error, 'manifest unknown: alpine:3.20');
    const create = await h.module.resolver.resolveForCreate(c.template_id).catch((e) => e);
    assert.equal(create.status, 400);
    assert.match(create.message, /is failed/);
    assert.ok((await h.rows('t_svc_template_job')).every((j) => j.active_spec_hash === null));
  },

  'a template center that refuses the build fails the job at once': async (h) => {
    h.tc.failBuildWith = 503;
    const c = await h.create(IMAGE);
    assert.equal(c.status, 'FAILED');
    const info = await job(h, c.job_id);
    assert.match(info.error, /template center did not accept the build/);
  },

  // The job's error is the team's to read: before this the socket error with the template
  // center's address was stored as it came (found by a helper reading the master as an attacker).
  'a template center that does not answer fails the job in words without its address': async (h) => {
    h.tc.dropBuild = true;
    const c = await h.create(IMAGE);
    assert.equal(c.status, 'FAILED');
    const info = await job(h, c.job_id);
    assert.match(info.error, /^the template center did not accept the build: POST \/tc\/api\/v1\/build: a platform component did not answer; retry shortly$/);
    const { host } = new URL(h.tc.url);
    assert.ok(!info.error.includes(host), info.error);
    assert.ok(!(await template(h, c.template_id)).error.includes(host));
  },

  'reconciler: RUNNING without progress past the threshold → FAILED; fresh kv progress keeps it alive': [{ staleAfterSec: 60 }, async (h) => {
    const stale = await h.create(IMAGE);
    const alive = await h.create({ image: 'registry.example/other:1' });
    await h.tc.callback(h.url, stale.job_id, { status: 'RUNNING', phase: 'PULLING' });
    await h.tc.callback(h.url, alive.job_id, { status: 'RUNNING', phase: 'PULLING' });
    const longAgo = Date.now() - 120_000;
    await setProgressClock(h, stale.job_id, longAgo);
    await setProgressClock(h, alive.job_id, longAgo);
    await h.coordination.kvSet(progressKey(alive.job_id), JSON.stringify({
      jobId: alive.job_id, phase: 'PULLING', layers: [], updatedAt: new Date().toISOString(),
    }));
    // A RUNNING callback refreshes the clock as well.
    const called = await h.create({ image: 'registry.example/third:1' });
    await setProgressClock(h, called.job_id, longAgo);
    await h.tc.callback(h.url, called.job_id, { status: 'RUNNING', phase: 'BUILDING' });
    const failed = await h.module.reconcileOnce();
    assert.deepEqual(failed, [stale.job_id]);
    assert.equal((await job(h, called.job_id)).status, 'RUNNING');
    const info = await job(h, stale.job_id);
    assert.equal(info.status, 'FAILED');
    assert.match(info.error, /no progress for 1[12]\d s .*retry with redo/);
    assert.equal((await template(h, stale.template_id)).status, 'failed');
    const other = await job(h, alive.job_id);
    assert.equal(other.status, 'RUNNING');
    // A build that outlives its reconciled job still registers its artifact, and redo reuses it.
    await h.addNode('n1');
    const late = h.tc.storeArtifact(h.tc.builds[0].artifactId);
    assert.equal(await h.tc.callback(h.url, stale.job_id, { status: 'BUILT', artifact: late }), 204);
    assert.equal((await job(h, stale.job_id)).status, 'FAILED');
    const buildsBefore = h.tc.builds.length;
    const redo = await h.call('POST', '/svc/template/redo', { template_id: stale.template_id });
    assert.equal(redo.status, 202);
    await h.module.settled();
    assert.equal(h.tc.builds.length, buildsBefore);
    assert.equal((await job(h, redo.body.job_id)).status, 'BUILT');
    assert.equal((await template(h, stale.template_id)).artifact_id, late.artifactId);
  }],

  'BUILT with zero target nodes → FAILED ErrNoTemplateNodes, no definition or placement rows; redo then reuses the READY artifact': async (h) => {
    const c = await h.create({ ...IMAGE, alias: 'lonely' });
    await h.finishBuild(c.job_id);
    const info = await job(h, c.job_id);
    assert.equal(info.status, 'FAILED');
    assert.match(info.error, /^ErrNoTemplateNodes/);
    assert.equal((await template(h, 'lonely')).status, 'failed');
    assert.deepEqual(await h.rows('t_svc_template_definition'), []);
    assert.deepEqual(await h.rows('t_svc_template_placement'), []);
    const [a] = await h.rows('t_svc_template_artifact');
    assert.equal(a.status, 'READY');

    // FAILED → redo with a reusable READY artifact → RUNNING (DISTRIBUTING) → BUILT, no new build.
    const node = await h.addNode('n1');
    const redo = await h.call('POST', '/svc/template/redo', { template_id: 'lonely' });
    assert.equal(redo.status, 202);
    assert.equal(redo.body.status, 'RUNNING');
    await h.module.settled();
    assert.equal(h.tc.builds.length, 1);
    const again = await job(h, redo.body.job_id);
    assert.equal(again.kind, 'REDO');
    assert.equal(again.status, 'BUILT');
    assert.equal(again.artifact_id, a.artifact_id);
    const tpl = await template(h, 'lonely');
    assert.equal(tpl.status, 'ready');
    assert.equal(tpl.artifact_id, a.artifact_id);
    assert.equal(tpl.latest_job_id, redo.body.job_id);
    assert.ok(node.artifacts.has(a.artifact_id));
    assert.equal((await h.rows('t_svc_template_definition')).length, 1);
  },

  'distribution failure keeps the READY artifact; redo redistributes it': async (h) => {
    const good = await h.addNode('n1');
    const bad = await h.addNode('n2');
    bad.failEnsureWith = 507;
    const c = await h.create(IMAGE);
    await h.finishBuild(c.job_id);
    const info = await job(h, c.job_id);
    assert.equal(info.status, 'FAILED');
    assert.match(info.error, /distribution failed on 1 of 2 node\(s\) \(n2: disk full\)/);
    assert.ok(good.artifacts.has(info.artifact_id));
    assert.deepEqual(await h.rows('t_svc_template_definition'), []);
    bad.failEnsureWith = null;
    const redo = await h.call('POST', '/svc/template/redo', { template_id: c.template_id });
    await h.module.settled();
    assert.equal(h.tc.builds.length, 1);
    assert.equal((await job(h, redo.body.job_id)).status, 'BUILT');
    assert.ok(bad.artifacts.has(info.artifact_id));
    assert.equal((await template(h, c.template_id)).status, 'ready');
  },

  'redo without a reusable artifact rebuilds from the recorded source (PENDING or BUILDING artifacts are not reused)': async (h) => {
    await h.addNode('n1');
    const c = await h.create({ ...IMAGE, registry_auth: { username: 'u', password: 'secret-pw' }, disk_size_mb: 4096 });
    await h.tc.callback(h.url, c.job_id, { status: 'RUNNING', phase: 'BUILDING' });
    await h.tc.callback(h.url, c.job_id, { status: 'FAILED', error: 'mkfs.ext4 failed' });
    const first = h.tc.lastBuild();
    assert.equal((await h.rows('t_svc_template_artifact')).find((a) => a.artifact_id === first.artifactId)?.status, 'BUILDING');
    const redo = await h.call('POST', '/svc/template/redo', { template_id: c.template_id });
    assert.equal(redo.status, 202);
    assert.equal(redo.body.status, 'PENDING');
    assert.equal(h.tc.builds.length, 2);
    const second = h.tc.lastBuild();
    assert.notEqual(second.artifactId, first.artifactId);
    assert.deepEqual(second.source, first.source);
    assert.equal(second.source.kind === 'registry' && second.source.auth?.password, 'secret-pw');
    // The template row keeps the credentials sealed by the vault, never in the clear.
    const kept = (await h.rows('t_svc_template')).find((t) => t.template_id === c.template_id)!;
    assert.doesNotMatch(kept.request_json ?? '', /secret-pw/);
    assert.match(kept.request_json ?? '', /"sealedAuth":"v1:/);
    assert.equal(second.diskSizeMB, 4096);
    assert.equal(second.specHash, first.specHash);
    // The job row keeps the request without the password.
    const row = (await h.rows('t_svc_template_job')).find((j) => j.job_id === redo.body.job_id)!;
    assert.equal(row.kind, 'REDO');
    assert.doesNotMatch(row.request_json, /secret-pw/);
    await h.finishBuild(redo.body.job_id);
    const tpl = await template(h, c.template_id);
    assert.equal(tpl.status, 'ready');
    assert.equal(tpl.artifact_id, second.artifactId);
  },

  'redo of a ready template moves it to a new definition and supersedes the old one': async (h) => {
    await h.addNode('n1');
    const c = await h.create(IMAGE);
    await h.finishBuild(c.job_id);
    // The artifact disappears from under the template: redo rebuilds; the template stays usable meanwhile.
    const first = h.tc.lastBuild().artifactId;
    await h.kysely.updateTable('t_svc_template_artifact').set({ status: 'PENDING' }).where('artifact_id', '=', first).execute();
    const redo = await h.call('POST', '/svc/template/redo', { template_id: c.template_id });
    assert.equal(redo.body.status, 'PENDING');
    assert.equal((await template(h, c.template_id)).status, 'ready');
    await h.finishBuild(redo.body.job_id);
    const defs = await h.rows('t_svc_template_definition');
    assert.equal(defs.length, 2);
    assert.ok(defs.find((d) => d.artifact_id === first)!.superseded_at! > 0);
    assert.equal(defs.find((d) => d.artifact_id !== first)!.superseded_at, null);
  },

  'legacy template: redo → FAILED at once; migrate moves the artifact into the template center; redo then works': async (h) => {
    await h.addNode('n1');
    const legacy = await h.module.service.registerLegacy({
      alias: 'old', localPath: '/var/lib/svc/legacy/old.ext4', sha256: 'ab'.repeat(32), sizeBytes: 10, sourceImageRef: 'docker.io/library/ubuntu:22.04',
    });
    assert.equal(legacy.legacy, true);
    assert.equal(legacy.status, 'ready');
    const jobs = await h.rows('t_svc_template_job');
    assert.deepEqual(jobs.map((j) => [j.kind, j.status]), [['LEGACY', 'BUILT']]);

    const redo = await h.call('POST', '/svc/template/redo', { template_id: 'old' });
    assert.equal(redo.status, 202);
    assert.equal(redo.body.status, 'FAILED');
    const info = await job(h, redo.body.job_id);
    assert.equal(info.kind, 'REDO');
    assert.match(info.error, /legacy in-process builder.*recreate it from the source image \(POST \/svc\/template with "image": "docker.io\/library\/ubuntu:22.04"\)/);
    assert.equal(h.tc.builds.length, 0);
    assert.equal((await template(h, 'old')).status, 'ready', 'the legacy artifact stays usable');

    const migrated = await h.call('POST', '/svc/template/migrate', { template_id: 'old' });
    assert.equal(migrated.status, 200);
    assert.equal(migrated.body.legacy, false);
    assert.deepEqual(h.tc.migrations, [{ artifactId: legacy.artifact_id, localPath: '/var/lib/svc/legacy/old.ext4' }]);
    const [a] = await h.rows('t_svc_template_artifact');
    assert.equal(a.storage, 'local');
    // Migrating again is a no-op.
    assert.equal((await h.call('POST', '/svc/template/migrate', { template_id: 'old' })).status, 200);
    assert.equal(h.tc.migrations.length, 1);

    const redo2 = await h.call('POST', '/svc/template/redo', { template_id: 'old' });
    await h.module.settled();
    assert.equal((await job(h, redo2.body.job_id)).status, 'BUILT');
    assert.equal(h.tc.builds.length, 0);
  },

  'callbacks for unknown jobs are 404; malformed reports 400': async (h) => {
    assert.equal(await h.tc.callback(h.url, 'no-such-job', { status: 'RUNNING', phase: 'PULLING' }), 404);
    const c = await h.create(IMAGE);
    assert.equal(await h.tc.callback(h.url, c.job_id, { status: 'DONE' as never }), 400);
    assert.equal(await h.tc.callback(h.url, c.job_id, { status: 'BUILT' }), 400);
    assert.equal(await h.tc.callback(h.url, c.job_id, { status: 'RUNNING', phase: 'SLEEPING' as never }), 400);
  },

  'a node that registers gets the artifacts of ready templates it lacks, and loses stale ones': async (h) => {
    await h.addNode('n1');
    const c = await h.create(IMAGE);
    await h.finishBuild(c.job_id);
    const artifactId = h.tc.lastBuild().artifactId;
    const late = await h.addNode('n2');
    late.artifacts.set('art-gone', { artifactId: 'art-gone', sha256: 'x', sizeBytes: 1, path: '/x' });
    h.module.onNodeRegistered('n2');
    await h.module.settled();
    assert.ok(late.artifacts.has(artifactId));
    assert.ok(!late.artifacts.has('art-gone'));
    assert.deepEqual((await h.rows('t_svc_template_placement')).map((p) => p.node_id).sort(), ['n1', 'n2']);
  },
});
