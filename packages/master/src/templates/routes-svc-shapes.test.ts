/**
 * The template routes' svc shapes and what a sandbox create resolves from them: TemplateInfo and
 * JobInfo, a start command and a runtime given at create, the artifact a ready template gives
 * through the master (400 while building), and templates the platform makes (debian_rootfs),
 * which a create waits for.
 * Every routes-*.test.ts file here adds its cases to the suite "template routes", on every engine.
 */
import assert from 'node:assert/strict';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { onEveryEngine } from './testing/engines.ts';
import { IMAGE } from './testing/routes-fixtures.ts';

onEveryEngine('template routes', {
  'TemplateInfo and JobInfo shapes; from-image job read; list': async (h) => {
    await h.addNode('n1');
    const c = await h.create({ rootfs_tar: '/srv/base.tar', alias: 'base', with_cube_ca: false, disk_size_mb: 1024 });
    const job = await h.call('GET', `/svc/template/from-image?job_id=${c.job_id}`);
    assert.equal(job.status, 200);
    assert.deepEqual(Object.keys(job.body).sort(), ['artifact_id', 'created_at', 'error', 'finished_at', 'job_id', 'kind', 'phase', 'progress', 'status', 'template_id', 'updated_at']);
    assert.deepEqual(job.body.progress, { layers: [], message: '' });
    await h.finishBuild(c.job_id);
    const info = (await h.call('GET', '/svc/template/base')).body;
    assert.equal(info.template_id, c.template_id);
    assert.equal(info.source_kind, 'rootfs_tar');
    assert.equal(info.source_image_ref, '/srv/base.tar');
    assert.equal(info.with_cube_ca, false);
    assert.equal(info.disk_size_mb, 1024);
    assert.equal(info.status, 'ready');
    assert.equal(info.latest_job_id, c.job_id);
    assert.ok(!Number.isNaN(Date.parse(info.created_at)) && !Number.isNaN(Date.parse(info.updated_at)));
    for (const k of ['template_id', 'alias', 'status', 'source_image_ref', 'latest_job_id', 'artifact_id', 'created_at', 'updated_at', 'image_info', 'cpu_count', 'memory_mb', 'disk_size_mb', 'with_cube_ca', 'error']) {
      assert.ok(k in info, k);
    }
    assert.equal(JSON.stringify(info).includes('request'), false);
    assert.equal('start_cmd' in info, false, 'no start command: no start_cmd');
    const list = await h.call('GET', '/svc/template');
    assert.deepEqual(list.body.templates.map((t: { template_id: string }) => t.template_id), [c.template_id]);
  },

  'a start command given at create is shown and handed to its sandboxes as the user, with its ready command': async (h) => {
    await h.addNode('n1');
    const c = await h.create({ rootfs_tar: '/srv/ci.tar', alias: 'served', start_cmd: 'serve --port 1', ready_cmd: 'curl -sf http://127.0.0.1:1/' });
    await h.finishBuild(c.job_id);
    const info = (await h.call('GET', '/svc/template/served')).body;
    assert.deepEqual([info.start_cmd, info.ready_cmd], ['serve --port 1', 'curl -sf http://127.0.0.1:1/']);
    const resolved = await h.module.resolver.resolveForCreate('served');
    assert.deepEqual(resolved.start, { command: 'serve --port 1', readyCommand: 'curl -sf http://127.0.0.1:1/', user: 'user' });
  },

  'a runtime given at create is shown and carried to its sandboxes; none given: the node decides': async (h) => {
    await h.addNode('n1');
    const c = await h.create({ rootfs_tar: '/srv/vm.tar', alias: 'vm', runtime: 'microvm' });
    await h.finishBuild(c.job_id);
    assert.equal((await h.call('GET', '/svc/template/vm')).body.runtime, 'microvm');
    assert.equal((await h.module.resolver.resolveForCreate('vm')).runtime, 'microvm');
    const plain = await h.create({ rootfs_tar: '/srv/plain.tar', alias: 'plain' });
    await h.finishBuild(plain.job_id);
    assert.equal('runtime' in (await h.call('GET', '/svc/template/plain')).body, false);
    assert.equal((await h.module.resolver.resolveForCreate('plain')).runtime, undefined);
  },

  'sandbox create resolution: building is 400 with the status, ready gives the artifact through the master': async (h) => {
    await h.addNode('n1');
    const c = await h.create({ ...IMAGE, alias: 'node', cpu_count: 3, memory_mb: 768, disk_size_mb: 3000 });
    const early = await h.module.resolver.resolveForCreate('node').catch((e) => e);
    assert.equal(early.status, 400);
    assert.match(early.message, /is building/);
    await h.finishBuild(c.job_id);
    const r = await h.module.resolver.resolveForCreate('node');
    assert.deepEqual({ ...r, artifact: { ...r.artifact, sha256: 'x' } }, {
      templateId: c.template_id, alias: 'node', cpuCount: 3, memoryMB: 768, diskSizeMB: 3000, envVars: {},
      // A local store's path too: a node agent on the same disk links it (ArtifactRef.localPath).
      artifact: {
        artifactId: h.tc.lastBuild().artifactId, sha256: 'x', sizeBytes: r.artifact.sizeBytes, downloadUrl: `${h.url}/svc/template/artifact/download?artifact_id=${h.tc.lastBuild().artifactId}`,
        localPath: `/var/lib/tc/${h.tc.lastBuild().artifactId}.ext4`,
      },
      owner: { teamId: DEFAULT_TEAM_ID, public: true },
    });
    assert.deepEqual(await h.module.resolver.idsFor('node'), [c.template_id]);
    assert.deepEqual(await h.module.resolver.idsFor(c.template_id), [c.template_id]);
  },

  'a template the platform makes (debian_rootfs): a create waits for its build, a failed one is 503 naming the build, bad sources 400': async (h) => {
    await h.addNode('n1');
    const ci = await h.create({ debian_rootfs: 'code-interpreter@0123456789abcdef', alias: 'code-interpreter-v1' });
    assert.equal((await h.call('GET', `/svc/template/${ci.template_id}`)).body.source_image_ref, 'code-interpreter@0123456789abcdef');
    assert.deepEqual(h.tc.lastBuild().source, { kind: 'debian-rootfs', flavor: 'code-interpreter', recipe: '0123456789abcdef' });
    const t0 = Date.now();
    const waiting = h.module.resolver.resolveForCreate('code-interpreter-v1');
    await new Promise((r) => setTimeout(r, 1_200));
    await h.finishBuild(ci.job_id);
    const r = await waiting;
    assert.equal(r.templateId, ci.template_id);
    assert.ok(Date.now() - t0 >= 1_200, 'the create waited for the build');

    const broken = await h.create({ debian_rootfs: 'base', alias: 'made-here' });
    await h.tc.callback(h.url, broken.job_id, { status: 'FAILED', error: 'mmdebstrap failed (1): E: Unable to locate package' });
    const failed = await h.module.resolver.resolveForCreate('made-here').catch((e) => e);
    assert.equal(failed.status, 503);
    assert.match(failed.message, new RegExp(`build ${broken.job_id}: mmdebstrap failed`));
    assert.match(failed.message, new RegExp(`svc tpl status ${broken.job_id}`));

    const slow = await h.create({ debian_rootfs: 'base', alias: 'made-slowly' });
    const timeout = h.cfg.master.create_timeout_insec;
    h.cfg.master.create_timeout_insec = 1;
    try {
      const late = await h.module.resolver.resolveForCreate('made-slowly').catch((e) => e);
      assert.equal(late.status, 503);
      assert.match(late.message, new RegExp(`still being built \\(build ${slow.job_id}\\)`));
    } finally {
      h.cfg.master.create_timeout_insec = timeout;
    }
    // A user's template that is building is still the user's 400 at once (routes above).
    for (const bad of ['alpine', 'base@xyz', 'base@0123', '/abs/path', '']) {
      const x = await h.call('POST', '/svc/template', { debian_rootfs: bad });
      assert.equal(x.status, 400, bad);
    }
    assert.equal((await h.call('POST', '/svc/template', { debian_rootfs: 'base', image: 'registry.example/x:1' })).status, 400);
  },
});
