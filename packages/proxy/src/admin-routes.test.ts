import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { assertServesExactly } from '@svc/contracts/contract-testing';
import { ADMIN_TOKEN_HEADER, PROXY_ADMIN_ROUTES } from '@svc/contracts/proxy-admin';
import { createAdminApp } from './admin-server.ts';

/** The admin app over handlers that note the purges that reached them. */
async function adminApp(adminToken = 'tok') {
  const purges: Array<string[] | undefined> = [];
  const app = createAdminApp(silentLogger(), {
    proxyId: 'p1', adminToken,
    heartbeatLastPushedMs: () => 0, cachedBackends: () => 0, tasks: () => ({}),
    purge: (ids) => { purges.push(ids); return 0; },
  });
  await app.ready();
  return { app, purges };
}

const purge = (app: Awaited<ReturnType<typeof adminApp>>['app'], payload: string | undefined, token = 'tok') => app.inject({
  method: 'POST', url: PROXY_ADMIN_ROUTES.purge.path,
  headers: { [ADMIN_TOKEN_HEADER]: token, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) }, payload,
});

test('the proxy\'s admin server serves exactly the routes of PROXY_ADMIN_ROUTES', async () => {
  const { app } = await adminApp();
  assertServesExactly(app, PROXY_ADMIN_ROUTES);
  await app.close();
});

test('POST /admin/backend_cache/delete: sandboxIds of another type is a 400 naming it; no body, or none, purges everything', async () => {
  const { app, purges } = await adminApp();
  for (const [body, message] of [
    [{ sandboxIds: 'sbx-1' }, 'sandboxIds must be array'],
    [{ sandboxIds: ['sbx-1', 7] }, 'sandboxIds[1] must be string'],
    ['sbx-1', 'request body must be object or null'],
  ] as const) {
    const r = await purge(app, JSON.stringify(body));
    assert.equal(r.statusCode, 400, JSON.stringify(body));
    assert.deepEqual(r.json(), { code: 400, message }, JSON.stringify(body));
  }
  assert.deepEqual(purges, []);
  for (const payload of [JSON.stringify({ sandboxIds: ['a', 'b'], other: 1 }), '{}', 'null', '', undefined]) {
    assert.equal((await purge(app, payload)).statusCode, 204, String(payload));
  }
  assert.deepEqual(purges, [['a', 'b'], undefined, undefined, undefined, undefined]);
  await app.close();
});

test('POST /admin/backend_cache/delete: a wrong token is a 403 before the body is looked at', async () => {
  const { app, purges } = await adminApp();
  for (const payload of [JSON.stringify({ sandboxIds: 5 }), '{not json']) {
    const r = await purge(app, payload, 'wrong');
    assert.equal(r.statusCode, 403, payload);
    assert.equal(r.json().code, 403);
  }
  assert.deepEqual(purges, []);
  await app.close();
});

test('with no admin token configured, the admin routes refuse everyone (503), with a token or without; health still answers', async () => {
  const { app, purges } = await adminApp('');
  for (const token of ['', 'anything']) {
    const r = await purge(app, '{}', token);
    assert.equal(r.statusCode, 503, `purge with ${JSON.stringify(token)}`);
    assert.equal(r.json().code, 503);
    assert.match(r.json().message, /admin_token/);
    const m = await app.inject({ method: 'GET', url: PROXY_ADMIN_ROUTES.metrics.path, headers: { [ADMIN_TOKEN_HEADER]: token } });
    assert.equal(m.statusCode, 503, `metrics with ${JSON.stringify(token)}`);
  }
  assert.deepEqual(purges, []);
  assert.equal((await app.inject({ method: 'GET', url: PROXY_ADMIN_ROUTES.health.path })).statusCode, 200);
  await app.close();
});
