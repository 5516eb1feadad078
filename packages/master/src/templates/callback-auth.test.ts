import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withSqliteHarness } from './testing/engines.ts';

const REPORT = { status: 'RUNNING', phase: 'PULLING' } as const;

test('template callback token (docs/design.md, Authentication and secrets)', async (t) => {
  await t.test('configured token: right token 204, wrong or missing token 401, never a 200 business error', () =>
    withSqliteHarness({ token: 'right-token' }, async (h) => {
      const c = await h.create({ image: 'registry.example/a:1' });
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, 'wrong-token'), 401);
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, 'right-token-but-longer'), 401);
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, ''), 401);
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, null), 401);
      assert.equal((await h.call('GET', `/svc/template/build/${c.job_id}/status`)).body.status, 'PENDING', 'a refused callback changes nothing');
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, 'right-token'), 204);
      assert.equal((await h.call('GET', `/svc/template/build/${c.job_id}/status`)).body.status, 'RUNNING');
      const r = await h.call('POST', `/internal/template/jobs/${c.job_id}/status`, REPORT, { 'x-svc-template-callback-token': 'nope' });
      assert.equal(r.status, 401);
      assert.equal(r.body.code, 401);
      assert.match(r.body.message, /X-Svc-Template-Callback-Token/);
    }));

  await t.test('token unset on the master: 503, whatever the caller sends', () =>
    withSqliteHarness({ token: '' }, async (h) => {
      const r = await h.call('POST', '/internal/template/jobs/any/status', REPORT, { 'x-svc-template-callback-token': 'anything' });
      assert.equal(r.status, 503);
      assert.match(r.body.message, /not configured/);
      assert.equal((await h.call('POST', '/internal/template/jobs/any/status', REPORT)).status, 503);
    }));

  await t.test('token unset with the development opt-in insecure_no_token: accepted', () =>
    withSqliteHarness({ token: '', insecureNoToken: true }, async (h) => {
      const c = await h.create({ image: 'registry.example/a:1' });
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, null), 204);
      assert.equal(await h.tc.callback(h.url, 'unknown-job', REPORT, null), 404);
    }));

  await t.test('the opt-in does not weaken a configured token', () =>
    withSqliteHarness({ token: 'right-token', insecureNoToken: true }, async (h) => {
      const c = await h.create({ image: 'registry.example/a:1' });
      assert.equal(await h.tc.callback(h.url, c.job_id, REPORT, 'wrong'), 401);
    }));

  await t.test('the master sends the token to the template center', () =>
    withSqliteHarness({ token: 'right-token' }, async (h) => {
      // The fake template center answers 401 to a missing or wrong token, so an accepted build proves it.
      const c = await h.create({ image: 'registry.example/a:1' });
      assert.equal(c.status, 'PENDING');
      assert.equal(h.tc.builds.length, 1);
    }));
});
