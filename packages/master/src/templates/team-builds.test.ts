import assert from 'node:assert/strict';
import { onEveryEngine } from './testing/engines.ts';

/**
 * maxConcurrentBuilds counts a team's image template builds (POST /templates, svc tpl create, a
 * redo that rebuilds) with its builder builds (builds/team-builds.ts): before 2026-11-30 image
 * builds counted against nothing, so a team limited to one build ran any number of pulls.
 */
const A = { 'x-svc-team': 'team-a' };
const image = (n: number) => ({ image: `registry.example/library/app-${n}:1` });

onEveryEngine('a team\'s builds at once', {
  'image builds count against maxConcurrentBuilds, started together too; other teams and the operator are not held; a finished build frees its place': [{ maxConcurrentBuilds: { 'team-a': 2 } }, async (h) => {
    const tried = await Promise.all([1, 2, 3, 4, 5].map((n) => h.call('POST', '/svc/template', image(n), A)));
    assert.deepEqual(tried.map((r) => r.status).sort(), [202, 202, 429, 429, 429], 'five at once: two places');
    const refused = tried.find((r) => r.status === 429)!;
    assert.match(refused.body.message, /^team quota maxConcurrentBuilds reached: the team may run 2 template builds at once and runs 2; start this one when one ends$/);
    assert.equal(h.tc.builds.length, 2, 'nothing of the refused ones reached the template center');
    assert.equal((await h.rows('t_svc_template')).length, 2, 'nor was a template made');
    assert.equal((await h.call('POST', '/templates', image(6), A)).status, 429, 'E2B\'s route is held the same');

    assert.equal((await h.call('POST', '/svc/template', image(7), { 'x-svc-team': 'team-b' })).status, 202, 'another team has its own count');
    assert.equal((await h.call('POST', '/svc/template', image(8))).status, 202, 'the operator counts against no team');

    const running = tried.filter((r) => r.status === 202);
    await h.finishBuild(running[0]!.body.job_id);
    const again = await h.call('POST', '/svc/template', image(9), A);
    assert.equal(again.status, 202, 'a finished build frees its place');
    // A failed one frees it too, and its redo, a rebuild, takes one again.
    assert.equal(await h.tc.callback(h.url, running[1]!.body.job_id, { status: 'FAILED', error: 'manifest unknown' }), 204);
    await h.module.settled();
    assert.equal((await h.call('POST', '/svc/template', image(10), A)).status, 202);
    const redo = await h.call('POST', '/svc/template/redo', { template_id: running[1]!.body.template_id }, A);
    assert.equal(redo.status, 429, JSON.stringify(redo.body));
  }],

  'a builder build waits while the team\'s image builds hold its places': [{ builder: true, maxConcurrentBuilds: { 'team-a': 1 } }, async (h) => {
    assert.equal((await h.call('POST', '/svc/template', image(1), A)).status, 202);
    const requested = await h.call('POST', '/v3/templates', { name: 'app' }, A);
    assert.equal(requested.status, 202, JSON.stringify(requested.body));
    const { templateID, buildID } = requested.body as { templateID: string; buildID: string };
    const started = await h.call('POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [] }, A);
    assert.equal(started.status, 429, JSON.stringify(started.body));
    assert.equal((await h.call('GET', `/templates/${templateID}/builds/${buildID}/status`, undefined, A)).body.status, 'waiting', 'it stays waiting');
  }],
});
