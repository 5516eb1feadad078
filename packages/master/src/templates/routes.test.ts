import assert from 'node:assert/strict';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import { progressKey } from '@svc/contracts/template-center';
import { onEveryEngine } from './testing/engines.ts';

const IMAGE = { image: 'registry.example/library/node:22' };

/** The build fields of a GET /templates entry. */
const pick = (t: Record<string, unknown>) => ({ buildID: t.buildID, buildCount: t.buildCount, buildStatus: t.buildStatus, envdVersion: t.envdVersion });

onEveryEngine('template routes', {
  'alias: set, replace, clear with absent/null/empty, duplicate, pattern': async (h) => {
    const a = await h.create({ ...IMAGE, alias: 'web' });
    const b = await h.create({ image: 'registry.example/other:1' });

    // Duplicate on create: 400 ErrDuplicateTemplate, nothing created.
    const dup = await h.call('POST', '/svc/template', { image: 'registry.example/third:1', alias: 'web' });
    assert.equal(dup.status, 400);
    assert.equal(dup.body.code, 130400);
    assert.match(dup.body.message, /^ErrDuplicateTemplate/);
    assert.equal((await h.call('GET', '/svc/template')).body.templates.length, 2);

    // Duplicate on PUT alias.
    const dupPut = await h.call('PUT', `/svc/template/${b.template_id}/alias`, { alias: 'web' });
    assert.equal(dupPut.status, 400);
    assert.match(dupPut.body.message, /^ErrDuplicateTemplate/);

    let r = await h.call('PUT', `/svc/template/${b.template_id}/alias`, { alias: 'api-2' });
    assert.equal(r.status, 200);
    assert.equal(r.body.alias, 'api-2');
    assert.equal((await h.call('GET', '/svc/template/api-2')).body.template_id, b.template_id);
    // The alias also addresses the template in PUT.
    r = await h.call('PUT', '/svc/template/api-2/alias', { alias: 'api-3' });
    assert.equal(r.body.alias, 'api-3');
    assert.equal((await h.call('GET', '/svc/template/api-2')).status, 404);
    // Exact matches only, on every engine (MySQL compares case-insensitively by default).
    assert.equal((await h.call('GET', '/svc/template/API-3')).status, 404);
    assert.equal((await h.call('GET', `/svc/template/${b.template_id.toUpperCase()}`)).status, 404);

    for (const body of [{ alias: null }, { alias: '' }, {}, undefined]) {
      await h.call('PUT', `/svc/template/${a.template_id}/alias`, { alias: 'web' });
      r = await h.call('PUT', `/svc/template/${a.template_id}/alias`, body);
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(r.body.alias, null, JSON.stringify(body));
    }
    // A cleared alias is free for another template.
    assert.equal((await h.call('PUT', `/svc/template/${b.template_id}/alias`, { alias: 'web' })).status, 200);

    for (const bad of ['Web', 'web_1', 'a'.repeat(65), 'tpl-abc', 'has space', 'from-image', 'ünï']) {
      const x = await h.call('PUT', `/svc/template/${a.template_id}/alias`, { alias: bad });
      assert.equal(x.status, 400, bad);
      assert.equal(x.body.code, 130400);
    }
    assert.equal((await h.call('PUT', `/svc/template/${a.template_id}/alias`, { alias: 7 })).status, 400);
    assert.equal((await h.call('PUT', `/svc/template/${a.template_id}/alias`, { alias: 'a'.repeat(64) })).status, 200);
    const onCreate = await h.call('POST', '/svc/template', { ...IMAGE, alias: 'UPPER' });
    assert.equal(onCreate.status, 400);
    assert.match(onCreate.body.message, /\[a-z0-9-\]/);
  },

  'teams: another team\'s template answers as a missing one on every route; a public one is read, never changed': async (h) => {
    const A = { 'x-svc-team': 'team-a' };
    const B = { 'x-svc-team': 'team-b' };
    const made = await h.call('POST', '/svc/template', { ...IMAGE, alias: 'private-a' }, A);
    assert.equal(made.status, 202);
    const id = made.body.template_id as string;
    const pub = await h.create({ image: 'registry.example/public:1', alias: 'public-base' });
    for (const [method, path, body] of [
      ['GET', `/svc/template/${id}`], ['GET', '/svc/template/private-a'], ['DELETE', `/svc/template/${id}`], ['PUT', `/svc/template/${id}/alias`, { alias: 'stolen' }],
      ['GET', `/templates/${id}`], ['DELETE', '/templates/private-a'], ['GET', '/templates/aliases/private-a'], ['POST', '/svc/template/redo', { template_id: id }],
      ['GET', `/templates/${id}/builds/${made.body.job_id}/status`], ['DELETE', `/svc/template/${pub.template_id}`], ['PUT', `/svc/template/${pub.template_id}/alias`, { alias: 'mine' }],
    ] as Array<[string, string, unknown?]>) {
      const r = await h.call(method, path, body, B);
      assert.equal(r.status, 404, `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, 130404, `${method} ${path}: the template's own not-found code`);
    }
    for (const path of [`/svc/template/build/${made.body.job_id}/status`, `/svc/template/from-image?job_id=${made.body.job_id}`]) {
      const r = await h.call('GET', path, undefined, B);
      const missing = await h.call('GET', path.replace(made.body.job_id, 'job-missing'), undefined, B);
      assert.deepEqual([r.status, r.body.code], [missing.status, missing.body.code], `${path}: as for a missing job`);
      assert.equal(r.status, 404);
      assert.equal((await h.call('GET', path, undefined, A)).status, 200, 'A reads its own job');
    }
    const listed = (await h.call('GET', '/svc/template', undefined, B)).body.templates.map((t: { template_id: string }) => t.template_id);
    assert.deepEqual(listed, [pub.template_id], 'B lists the public template, not A\'s');
    assert.deepEqual((await h.call('GET', '/templates', undefined, B)).body.map((t: { templateID: string; public: boolean }) => [t.templateID, t.public]), [[pub.template_id, true]]);
    assert.equal((await h.call('GET', `/svc/template/${pub.template_id}`, undefined, B)).status, 200, 'a public template is read by every team');
    assert.equal((await h.call('GET', `/svc/template/${id}`, undefined, A)).status, 200, 'A still has its own');
    assert.equal((await h.call('GET', `/templates/aliases/private-a`, undefined, A)).body.public, false);
    assert.equal((await h.call('GET', '/svc/template')).body.templates.length, 2, 'the operator sees every template');
  },

  'unknown id or alias: 404 code 130404; missing template id: 400 ErrTemplateIDRequired': async (h) => {
    for (const [method, path, body] of [
      ['GET', '/svc/template/tpl-nope', undefined],
      ['GET', '/svc/template/no-such-alias', undefined],
      ['DELETE', '/svc/template/tpl-nope', undefined],
      ['PUT', '/svc/template/tpl-nope/alias', { alias: 'x' }],
      ['POST', '/svc/template/redo', { template_id: 'tpl-nope' }],
      ['POST', '/svc/template/migrate', { template_id: 'nope' }],
      ['GET', '/templates/tpl-nope', undefined],
      ['GET', '/templates/aliases/nope', undefined],
    ] as const) {
      const r = await h.call(method, path, body);
      assert.equal(r.status, 404, `${method} ${path}`);
      assert.equal(r.body.code, 130404, `${method} ${path}`);
      assert.match(r.body.message, /template .* not found/);
    }
    // E2B's DELETE /templates/{id} also deletes snapshots; the official SDK reads only code 404 there.
    const gone = await h.call('DELETE', '/templates/tpl-nope');
    assert.deepEqual([gone.status, gone.body.code], [404, 404]);
    assert.match(gone.body.message, /no template or snapshot tpl-nope/);
    for (const path of ['/svc/template/redo', '/svc/template/migrate']) {
      for (const body of [{}, { template_id: '' }, undefined]) {
        const r = await h.call('POST', path, body);
        assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
        assert.equal(r.body.code, 130400);
        assert.match(r.body.message, /^ErrTemplateIDRequired/);
      }
    }
    assert.equal((await h.call('GET', '/svc/template/build/nope/status')).status, 404);
    assert.equal((await h.call('GET', '/svc/template/from-image')).status, 400);
    const resolve = await h.module.resolver.resolveForCreate('nope').catch((e) => e);
    assert.equal(resolve.status, 404);
    assert.equal(resolve.code, 130404);
    assert.deepEqual(await h.module.resolver.idsFor('tpl-deleted'), ['tpl-deleted']);
  },

  'bad source, platform and option combinations are 400 with a clear message': async (h) => {
    const cases: Array<[Record<string, unknown> | string, RegExp]> = [
      [{}, /exactly one source is required/],
      [{ image: 'a:1', rootfs_tar: '/x.tar' }, /exactly one source .*got image and rootfs_tar/],
      [{ rootfs_tar: 'relative.tar' }, /absolute path/],
      [{ rootfs_tar: '/r.tar', platform: 'linux/amd64' }, /platform applies only to image and oci_layout/],
      [{ docker_archive: '/d.tar', registry_auth: { username: 'u', password: 'p' } }, /registry_auth applies only to an image source/],
      [{ oci_layout: '/l', insecure_registry: true }, /insecure_registry applies only to an image source/],
      [{ image: 'a:1', platform: 'amd64' }, /os\/arch\[\/variant\]/],
      [{ image: 'a:1', platform: 'windows/amd64' }, /os must be linux/],
      [{ image: 'a:1', platform: 'linux/m68k' }, /unknown architecture/],
      [{ image: 'a:1', registry_auth: { username: 'u' } }, /^registry_auth\.password is required$/],
      [{ image: 'a:1', with_cube_ca: true, with_svc_ca: false }, /disagree/],
      [{ image: 'a:1', cpu_count: 0 }, /^cpu_count must be >= 1$/],
      [{ image: 'a:1', memory_mb: 1.5 }, /^memory_mb must be integer or null$/],
      [{ image: 'a:1', memoryMB: 512 }, /^memoryMB is not a known field$/],
      [{ image: 7 }, /^image must be string or null$/],
      [{ image: 'has space:1' }, /without spaces/],
      [{ image: 'a:1', ready_cmd: 'true' }, /ready_cmd needs a start_cmd/],
      [{ image: 'a:1', start_cmd: 7 }, /^start_cmd must be string or null$/],
      [{ image: 'a:1', runtime: 'docker' }, /^runtime must be one of gvisor, microvm/],
      ['[1,2]', /^request body must be object$/],
    ];
    for (const [body, message] of cases) {
      const r = typeof body === 'string'
        ? await fetch(`${h.url}/svc/template`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(async (x) => ({ status: x.status, body: await x.json() }))
        : await h.call('POST', '/svc/template', body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 130400);
      assert.match(r.body.message, message, JSON.stringify(body));
    }
    const malformed = await fetch(`${h.url}/svc/template`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    assert.equal(malformed.status, 400);
    assert.equal(h.tc.builds.length, 0);
    // The accepted spellings.
    assert.equal((await h.call('POST', '/svc/template/from-image', { ...IMAGE, platform: 'linux/arm64/v8', with_svc_ca: false })).status, 202);
    assert.deepEqual(h.tc.lastBuild().source, { kind: 'registry', ref: IMAGE.image, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } });
    assert.equal(h.tc.lastBuild().withSvcCa, false);
    assert.equal((await h.call('POST', '/svc/template', { oci_layout: '/srv/layout', insecure_registry: undefined })).status, 202);
    assert.equal((await h.call('POST', '/svc/template', { docker_archive: '/srv/image.tar' })).status, 202);
    assert.deepEqual(h.tc.lastBuild().source, { kind: 'docker-archive', path: '/srv/image.tar' });
    assert.equal((await h.call('POST', '/svc/template', { image: 'localhost:5000/a:1', insecure_registry: true, registry_auth: { username: 'u', password: 'p' } })).status, 202);
    assert.equal((h.tc.lastBuild().source as { insecure?: boolean }).insecure, true);
  },

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

  'E2B shapes: POST /templates, GET /templates, /templates/:id, aliases, build status, DELETE': async (h) => {
    await h.addNode('n1');
    const created = await h.call('POST', '/templates', { ...IMAGE, alias: 'e2b-one', cpu_count: 2, memory_mb: 512 });
    assert.equal(created.status, 202);
    assert.deepEqual(Object.keys(created.body).sort(), ['buildID', 'templateID']);
    const { templateID, buildID } = created.body;
    let status = await h.call('GET', `/templates/${templateID}/builds/${buildID}/status`);
    assert.equal(status.status, 200);
    assert.deepEqual(status.body, { templateID, buildID, status: 'waiting', logs: [], logEntries: [] });
    await h.tc.callback(h.url, buildID, { status: 'RUNNING', phase: 'PULLING' });
    assert.equal((await h.call('GET', `/templates/${templateID}/builds/${buildID}/status`)).body.status, 'building');
    await h.finishBuild(buildID);
    status = await h.call('GET', `/templates/e2b-one/builds/${buildID}/status`);
    assert.equal(status.body.status, 'ready');

    const list = await h.call('GET', '/templates');
    assert.equal(list.status, 200);
    assert.equal(list.body.length, 1);
    const t = list.body[0];
    assert.equal(t.templateID, templateID);
    assert.equal(t.buildID, buildID);
    assert.deepEqual(t.aliases, ['e2b-one']);
    assert.deepEqual(t.names, ['e2b-one']);
    assert.equal(t.cpuCount, 2);
    assert.equal(t.memoryMB, 512);
    assert.equal(t.buildStatus, 'ready');
    assert.equal(t.buildCount, 1);
    assert.equal(t.public, true, 'the operator makes public templates (docs/security.md)');

    const detail = await h.call('GET', `/templates/${templateID}`);
    assert.equal(detail.body.templateID, templateID);
    assert.deepEqual(detail.body.builds.map((b: { buildID: string; status: string }) => [b.buildID, b.status]), [[buildID, 'ready']]);
    assert.deepEqual((await h.call('GET', '/templates/aliases/e2b-one')).body, { templateID, public: true });
    // The alias route answers for aliases only, not ids.
    assert.equal((await h.call('GET', `/templates/aliases/${templateID}`)).status, 404);

    const other = await h.call('POST', '/templates', { image: 'registry.example/x:1' });
    assert.equal((await h.call('GET', `/templates/${templateID}/builds/${other.body.buildID}/status`)).status, 404);

    const failed = await h.call('POST', '/templates', { image: 'registry.example/broken:1' });
    await h.tc.callback(h.url, failed.body.buildID, { status: 'FAILED', error: 'unauthorized: pull access denied' });
    const fs = await h.call('GET', `/templates/${failed.body.templateID}/builds/${failed.body.buildID}/status`);
    assert.equal(fs.body.status, 'error');
    assert.deepEqual(fs.body.reason, { message: 'unauthorized: pull access denied' });

    assert.equal((await h.call('DELETE', `/templates/${templateID}`)).status, 204);
    assert.equal((await h.call('GET', `/templates/${templateID}`)).status, 404);
  },

  'E2B shapes: builder builds (Template.build) are listed by GET /templates/{id}, newest first, and summed up by GET /templates': [{ builder: true }, async (h) => {
    const buildsOf = async (id: string) => (await h.call('GET', `/templates/${id}`)).body.builds as Array<Record<string, unknown>>;
    const listed = async (id: string) => (await h.call('GET', '/templates')).body.find((t: { templateID: string }) => t.templateID === id);
    const request = async (body: Record<string, unknown>) => {
      // Builds a millisecond apart: the answers order them by creation.
      await new Promise((r) => setTimeout(r, 5));
      const r = await h.call('POST', '/v3/templates', body);
      assert.equal(r.status, 202, JSON.stringify(r.body));
      return r.body as { templateID: string; buildID: string };
    };
    const start = async (id: string, build: string, command: string) =>
      assert.equal((await h.call('POST', `/v2/templates/${id}/builds/${build}`, { fromTemplate: 'base', steps: [{ type: 'RUN', args: [command] }] })).status, 202);

    const first = await request({ name: 'app', cpuCount: 2, memoryMB: 512 });
    const id = first.templateID;
    const disk = h.cfg.svclet_conf.default_disk_size_mb;
    const [waiting] = await buildsOf(id);
    assert.deepEqual({ ...waiting, createdAt: 'x', updatedAt: 'x' }, { buildID: first.buildID, status: 'waiting', cpuCount: 2, memoryMB: 512, diskSizeMB: disk, createdAt: 'x', updatedAt: 'x' });
    assert.deepEqual(pick(await listed(id)), { buildID: first.buildID, buildCount: 1, buildStatus: 'waiting', envdVersion: '' }, 'no ready build yet: the list names the one there is');

    await start(id, first.buildID, 'make');
    await h.builds!.settled();
    const [ready] = await buildsOf(id);
    assert.equal(ready!.status, 'ready');
    assert.equal(ready!.envdVersion, ENVD_VERSION);
    assert.ok(Date.parse(ready!.finishedAt as string) >= Date.parse(ready!.createdAt as string));
    assert.deepEqual(pick(await listed(id)), { buildID: first.buildID, buildCount: 1, buildStatus: 'ready', envdVersion: ENVD_VERSION });

    // A failed build of a template that has a good one: the template keeps it, the list says the newest build failed.
    const second = await request({ name: 'app', cpuCount: 4, memoryMB: 1024 });
    h.builderFakes!.failCommand('broken', 1);
    await start(id, second.buildID, 'broken');
    await h.builds!.settled();
    let all = await buildsOf(id);
    assert.deepEqual(all.map((b) => [b.buildID, b.status, b.cpuCount, b.memoryMB]), [[second.buildID, 'error', 4, 1024], [first.buildID, 'ready', 2, 512]]);
    assert.equal('envdVersion' in all[0]!, false, 'only a ready build has sandboxes, so an envd');
    assert.deepEqual(pick(await listed(id)), { buildID: first.buildID, buildCount: 2, buildStatus: 'error', envdVersion: ENVD_VERSION });

    // A build under way is found from its template while its step runs.
    let release!: () => void;
    h.builderFakes!.held.set('slow', new Promise<void>((r) => { release = r; }));
    const third = await request({ name: 'app' });
    await start(id, third.buildID, 'slow');
    all = await buildsOf(id);
    assert.deepEqual(all.map((b) => [b.buildID, b.status]), [[third.buildID, 'building'], [second.buildID, 'error'], [first.buildID, 'ready']]);
    assert.equal('finishedAt' in all[0]!, false);
    assert.equal((await listed(id)).buildStatus, 'building');
    const status = await h.call('GET', `/templates/${id}/builds/${third.buildID}/status`);
    assert.equal(status.body.status, 'building', 'the status route and the template\'s builds say the same');
    assert.deepEqual(status.body.logs, [], 'E2B\'s deprecated string list is empty for its V2 builds; logEntries carries the log');
    assert.ok(status.body.logEntries.length > 0);
    release();
    await h.builds!.settled();
    assert.equal((await buildsOf(id))[0]!.status, 'ready');

    // An image template's build jobs and another template's builder builds stay apart.
    const image = await h.call('POST', '/templates', { ...IMAGE, alias: 'img' });
    assert.deepEqual((await buildsOf(image.body.templateID)).map((b) => b.buildID), [image.body.buildID]);
    assert.equal((await buildsOf(id)).length, 3);
  }],

  'E2B build status of a build job: its progress message is one log entry, paged by logsOffset, limit and level; logs stays empty': async (h) => {
    const created = await h.call('POST', '/templates', { ...IMAGE, alias: 'paged' });
    const { templateID, buildID } = created.body;
    await h.tc.callback(h.url, buildID, { status: 'RUNNING', phase: 'PULLING' });
    await h.coordination.kvSet(progressKey(buildID), JSON.stringify({ jobId: buildID, phase: 'PULLING', layers: [], message: 'pulling 1 of 2 layers', updatedAt: new Date().toISOString() }));
    const status = (q: string) => h.call('GET', `/templates/${templateID}/builds/${buildID}/status${q}`).then((r) => r.body);
    const first = await status('');
    assert.equal(first.status, 'building');
    assert.deepEqual(first.logEntries.map((e: { level: string; message: string }) => [e.level, e.message]), [['info', 'pulling 1 of 2 layers']]);
    assert.deepEqual(first.logs, []);
    assert.deepEqual((await status('?logsOffset=1')).logEntries, [], 'an entry already seen is not answered again');
    assert.deepEqual((await status('?logsOffset=0&limit=0')).logEntries, []);
    assert.deepEqual((await status('?level=warn')).logEntries, []);
    assert.equal((await status('?level=info')).logEntries.length, 1);
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

  'store failures are database errors on the wire': async (h) => {
    await h.kysely.schema.dropTable('t_svc_template').execute();
    const r = await h.call('GET', '/svc/template');
    assert.equal(r.status, 500);
    assert.match(r.body.message, /^database error: ErrTemplateStoreNotInitialized/);
  },
});
