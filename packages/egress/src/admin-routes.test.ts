import { test } from 'node:test';
import assert from 'node:assert/strict';
import { silentLogger } from '@svc/common';
import { assertServesExactly } from '@svc/contracts/contract-testing';
import { EGRESS_ADMIN_TOKEN_HEADER, REDACTED } from '@svc/contracts/egress';
import { EGRESS_ADMIN_ROUTES } from '@svc/contracts/egress-routes';
import { pathTo } from '@svc/contracts/route-table';
import { createEgressAdminApp } from './admin-server.ts';
import { PolicyStore } from './policy-store.ts';

async function adminApp() {
  const store = new PolicyStore();
  const app = createEgressAdminApp({ logger: silentLogger(), adminToken: 'tok', store, tasks: () => ({}) });
  await app.ready();
  return { app, store };
}

const put = (app: Awaited<ReturnType<typeof adminApp>>['app'], sandboxId: string, body: unknown, token = 'tok') => app.inject({
  method: 'PUT', url: pathTo(EGRESS_ADMIN_ROUTES.putPolicy, { sandboxId }),
  headers: { [EGRESS_ADMIN_TOKEN_HEADER]: token, 'content-type': 'application/json' }, payload: JSON.stringify(body),
});

const policy = {
  sandboxId: 's1', teamId: 't1', address: '10.0.0.2',
  rules: [{ name: 'api', match: { host: 'api.example.com' }, action: { allow: true, inject: [{ header: 'X-Key', secret: 'sek-key-1' }] } }],
  fallback: { allowInternetAccess: false, allowOut: ['10.1.0.0/16'], denyOut: [] },
};

test('the egress admin server serves exactly the routes of EGRESS_ADMIN_ROUTES', async () => {
  const { app } = await adminApp();
  assertServesExactly(app, EGRESS_ADMIN_ROUTES);
  await app.close();
});

test('PUT /admin/policies/:sandboxId: a field of another type is a 400 naming it; what is inside is checked as before', async () => {
  const { app, store } = await adminApp();
  for (const [body, message] of [
    [{ ...policy, address: 5 }, /^address must be string$/],
    [{ ...policy, sandboxId: 5 }, /^sandboxId must be string$/],
    [{ ...policy, teamId: 7 }, /^teamId must be string or null$/],
    [{ ...policy, rules: {} }, /^rules must be array or null$/],
    [{ ...policy, fallback: { allowInternetAccess: 'yes' } }, /^fallback\.allowInternetAccess must be boolean$/],
    [{ ...policy, fallback: { allowInternetAccess: true, allowOut: [1] } }, /^fallback\.allowOut\[0\] must be string$/],
    [{ ...policy, transforms: 'x' }, /^transforms must be array or null$/],
    [{ address: '10.0.0.2' }, /^sandboxId is required$/],
    [[policy], /^request body must be object$/],
    // Past the schema: the path's id, then the policy's own checks (policy-check.ts).
    [{ ...policy, sandboxId: 's2' }, /^the body's sandboxId "s2" differs from the path's "s1"$/],
    [{ ...policy, address: '10.0.0.300' }, /^address must be an IPv4 address/],
    [{ ...policy, rules: [{ action: {} }] }, /action must be an object with allow true or false/],
  ] as const) {
    const r = await put(app, 's1', body);
    assert.equal(r.statusCode, 400, JSON.stringify(body));
    assert.match(r.json().message, message, JSON.stringify(body));
  }
  assert.equal(store.size, 0);
  assert.equal((await put(app, 's1', { ...policy, address: 5 }, 'wrong')).statusCode, 403, 'the token before the body');

  const ok = await put(app, 's1', { ...policy, teamId: null, transforms: null, extra: 'unread' });
  assert.equal(ok.statusCode, 200);
  assert.equal(ok.json().rules[0].action.inject[0].secret, REDACTED);
  assert.equal(store.get('s1')?.rules[0].action.inject?.[0].secret, 'sek-key-1');
  assert.equal(store.get('s1')?.teamId, undefined);
  await app.close();
});
