/**
 * The template routes in E2B's shapes: POST /templates, GET /templates, /templates/:id, aliases,
 * build status and DELETE; builder builds (Template.build) listed newest first and summed up; a
 * build job's progress as paged log entries.
 * Every routes-*.test.ts file here adds its cases to the suite "template routes", on every engine.
 */
import assert from 'node:assert/strict';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import { progressKey } from '@svc/contracts/template-center';
import { onEveryEngine } from './testing/engines.ts';
import { IMAGE } from './testing/routes-fixtures.ts';

/** The build fields of a GET /templates entry. */
const pick = (t: Record<string, unknown>) => ({ buildID: t.buildID, buildCount: t.buildCount, buildStatus: t.buildStatus, envdVersion: t.envdVersion });

onEveryEngine('template routes', {
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

  'build status logsOffset and build logs cursor past a safe integer: a 400, not the database\'s 500': [{ builder: true }, async (h) => {
    const { templateID, buildID } = (await h.call('POST', '/templates', { ...IMAGE, alias: 'huge' })).body;
    // PostgreSQL's bigint refused 1e20 with a 500; the schema answers first.
    for (const path of [`/templates/${templateID}/builds/${buildID}/status?logsOffset=100000000000000000000`, `/templates/${templateID}/builds/${buildID}/logs?cursor=100000000000000000000`]) {
      const r = await h.call('GET', path);
      assert.deepEqual([r.status, r.body.code, typeof r.body.message], [400, 130400, 'string'], path);
    }
    assert.equal((await h.call('GET', `/templates/${templateID}/builds/${buildID}/status?logsOffset=${Number.MAX_SAFE_INTEGER}`)).status, 200);
  }],
});
