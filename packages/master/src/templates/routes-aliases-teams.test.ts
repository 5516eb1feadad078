/**
 * The template routes: aliases (set, replace, clear, duplicates, the pattern) and teams (another
 * team's template answers as a missing one on every route; a public one is read, never changed).
 * Every routes-*.test.ts file here adds its cases to the suite "template routes", on every engine.
 */
import assert from 'node:assert/strict';
import { ErrorCodes, type SvcError } from '@svc/common';
import { onEveryEngine } from './testing/engines.ts';
import { IMAGE } from './testing/routes-fixtures.ts';

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

    // A create from it: B learns nothing of its state (a status and a build's error were told to any team).
    await h.tc.callback(h.url, made.body.job_id, { status: 'FAILED', error: 'pull from registry.internal.example: 401' });
    for (const ref of [id, 'private-a', 'private-a:default']) {
      const e = await h.module.resolver.resolveForCreate(ref, 'team-b').then(() => assert.fail(ref), (x: SvcError) => x);
      assert.equal(e.status, 404, ref);
      assert.equal(e.code, ErrorCodes.templateNotFound, ref);
      assert.doesNotMatch(e.message, /failed|registry/, ref);
    }
    const own = await h.module.resolver.resolveForCreate(id, 'team-a').then(() => assert.fail('not ready'), (x: SvcError) => x);
    assert.equal(own.status, 400, 'A is told its own template failed');
    assert.match(own.message, /registry\.internal\.example: 401/);
  },
});
