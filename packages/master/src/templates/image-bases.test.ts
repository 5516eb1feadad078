import assert from 'node:assert/strict';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { onEveryEngine } from './testing/engines.ts';

/**
 * Images pulled for a team stay that team's (spec-hash.ts, TemplateService.imageTemplate): the
 * builder's image base is the build's team's template, found again only by a team that may use
 * it, and a pull with credentials is never shared with a team that did not give them, neither
 * as a template, nor as a running job, nor as a template center build.
 */
const PRIVATE = 'registry.example/acme/secret-app:1';
const A_AUTH = { username: 'acme', password: 'pw-a' };

onEveryEngine('image pulls and teams', {
  'a builder base pulled with team A\'s credentials is A\'s, private, and never handed to team B': async (h) => {
    await h.addNode('n1');
    const svc = h.module.service;
    const a = await svc.imageTemplate(PRIVATE, A_AUTH, { teamId: 'team-a' });
    const row = (await h.rows('t_svc_template')).find((t) => t.template_id === a)!;
    assert.deepEqual([row.team_id, Number(row.public)], ['team-a', 0], 'the base is the build\'s team\'s, not a public template of the operator\'s');
    await h.finishBuild(h.tc.lastBuild().jobId);
    assert.equal((await h.rows('t_svc_template')).find((t) => t.template_id === a)!.status, 'ready');

    assert.equal(await svc.imageTemplate(PRIVATE, { username: 'acme', password: 'rotated' }, { teamId: 'team-a' }), a, 'A again (its password since changed): its own base');
    const bNone = await svc.imageTemplate(PRIVATE, undefined, { teamId: 'team-b' });
    const bOwn = await svc.imageTemplate(PRIVATE, { username: 'b', password: 'pw-b' }, { teamId: 'team-b' });
    assert.notEqual(bNone, a, 'B without credentials gets a template of its own, whose pull fails without them');
    assert.notEqual(bOwn, a, 'B with credentials of its own pulls for itself');
    assert.notEqual(bOwn, bNone);
    const pulls = h.tc.builds.filter((x) => x.source.kind === 'registry' && x.source.ref === PRIVATE);
    assert.equal(pulls.length, 3, 'three pulls: A\'s, B\'s without credentials and B\'s with its own');
    assert.deepEqual(pulls.map((x) => (x.source as { auth?: unknown }).auth), [A_AUTH, undefined, { username: 'b', password: 'pw-b' }]);
    assert.equal(new Set(pulls.map((x) => x.specHash)).size, 3, 'three specs: the template center never joins one to another');

    const listedToB = (await h.call('GET', '/svc/template', undefined, { 'x-svc-team': 'team-b' })).body.templates.map((t: { template_id: string }) => t.template_id);
    assert.ok(!listedToB.includes(a), 'B does not list A\'s base');
    assert.equal((await h.call('GET', `/svc/template/${a}`, undefined, { 'x-svc-team': 'team-b' })).status, 404, 'nor read it');
  },

  'an image without credentials: a team reuses its own base or a public one, never another team\'s private one; the operator\'s stays public': async (h) => {
    const svc = h.module.service;
    const image = 'registry.example/library/node:22';
    const a = await svc.imageTemplate(image, undefined, { teamId: 'team-a' });
    assert.equal(await svc.imageTemplate(image, undefined, { teamId: 'team-a' }), a);
    const b = await svc.imageTemplate(image, undefined, { teamId: 'team-b' });
    assert.notEqual(b, a, 'A\'s base is private to A');
    const pub = await h.create({ image });
    assert.equal(await svc.imageTemplate(image, undefined, { teamId: 'team-c' }), pub.template_id, 'an operator\'s public template of the image is anyone\'s');
    const rows = await h.rows('t_svc_template');
    assert.deepEqual(rows.filter((t) => t.template_id === pub.template_id).map((t) => [t.team_id, Number(t.public)]), [[DEFAULT_TEAM_ID, 1]]);
    assert.equal(new Set(rows.map((t) => t.spec_hash)).size, 1, 'without credentials the spec is the image\'s alone (artifacts and builds are shared)');
  },

  'svc tpl create with credentials: a running pull of team A is not joined by team B naming the same image': async (h) => {
    const A = { 'x-svc-team': 'team-a' };
    const B = { 'x-svc-team': 'team-b' };
    const first = await h.call('POST', '/svc/template', { image: PRIVATE, registry_auth: A_AUTH }, A);
    const second = await h.call('POST', '/svc/template', { image: PRIVATE }, B);
    const third = await h.call('POST', '/svc/template', { image: PRIVATE, registry_auth: A_AUTH }, A);
    assert.deepEqual([first.status, second.status, third.status], [202, 202, 202]);
    assert.notEqual(second.body.job_id, first.body.job_id, 'B\'s create is a job of its own');
    assert.equal(third.body.job_id, first.body.job_id, 'A\'s second create joins A\'s running job');
  },
});
