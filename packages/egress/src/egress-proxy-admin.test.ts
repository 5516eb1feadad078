/**
 * The egress proxy's policies as its admin API sets them: a sandbox with no rule falls back to its
 * allowOut and denyOut addresses, with E2B's transforms injecting only into what is allowed; and
 * the API's own token checks, validation and CRUD, and its 503 without a token. The fixture is
 * testing/egress-proxy-fixture.ts.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { REDACTED, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { startEgressProxy } from './egress-proxy.ts';
import {
  ADMIN_TOKEN, TRANSFORM_SECRET, admin, auditFind, call, dir, eventually, headerMap, proxy, sandboxPolicy,
  startEgressProxyFixture, stopEgressProxyFixture, upstreamConnections,
} from './testing/egress-proxy-fixture.ts';

before(async () => {
  await startEgressProxyFixture();
  // The policy source fails twice first (egress-proxy-forwarding.test.ts watches that); these tests start once it has answered.
  await eventually(() => proxy.ready(), 'the proxy to become ready', 5_000);
});
after(stopEgressProxyFixture);

test('fallback by address: allowed in allowOut, denied in denyOut, with no rule matching', async () => {
  const transforms = [{ host: 'api.example.test', inject: [{ header: 'X-Transform', secret: TRANSFORM_SECRET }] }];
  const put = (fallback: SandboxEgressPolicy['fallback']) => admin('PUT', '/admin/policies/sbx-fallback', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-fallback', address: '127.0.0.1', rules: [], fallback, transforms } });
  try {
    const stored = await put({ allowInternetAccess: false, allowOut: ['127.0.0.0/8'], denyOut: [] });
    assert.equal(stored.status, 200);
    assert.equal(stored.json.transforms[0].inject[0].secret, REDACTED);
    assert.equal(proxy.store.get('sbx-test'), undefined, 'the newer policy at the address displaced the older sandbox');
    const ok = await call({ scheme: 'http', host: 'plain.example.test', path: '/fallback-allowed' });
    assert.equal(ok.status, 200);
    assert.equal(headerMap(ok.json.headers ?? [])['x-transform'], undefined, 'a transform applies only to its host');
    // E2B's transform injects into what the fallback allowed, under the same Host/SNI guard.
    const tlsOk = await call({ host: 'api.example.test', path: '/fallback-tls' });
    assert.equal(tlsOk.status, 200);
    assert.equal(headerMap(tlsOk.json.headers ?? [])['x-transform'], TRANSFORM_SECRET);
    const fired = await auditFind((l) => l.type === 'security_event' && l.reason === 'inject_fired' && l.path === '/fallback-tls', 'the transform\'s inject_fired event');
    assert.equal(fired.rule, 'transform api.example.test');
    const mismatch = await call({ host: 'api.example.test', servername: 'www.example.test', path: '/fallback-mismatch' });
    assert.equal(mismatch.status, 403);

    assert.equal((await put({ allowInternetAccess: true, allowOut: [], denyOut: ['127.0.0.1/32'] })).status, 200);
    const before = { ...upstreamConnections };
    const no = await call({ scheme: 'http', host: 'plain.example.test', path: '/fallback-denied' });
    assert.equal(no.status, 403);
    assert.match(no.json.message ?? '', /deny_out 127\.0\.0\.1\/32/);
    assert.deepEqual(upstreamConnections, before);
    await auditFind((l) => l.type === 'security_event' && l.reason === 'default_deny' && l.path === '/fallback-denied', 'the fallback deny event');
    // Transforms grant nothing: the denied address stays denied, and nothing is injected.
    const deniedTls = await call({ host: 'api.example.test', path: '/fallback-denied-tls' });
    assert.equal(deniedTls.status, 403);
    assert.equal((await readFile(join(dir, 'log', 'svc-egress', 'access.jsonl'), 'utf8')).includes(TRANSFORM_SECRET), false);
  } finally {
    assert.equal((await admin('PUT', '/admin/policies/sbx-test', { token: ADMIN_TOKEN, body: sandboxPolicy() })).status, 200);
  }
});

test('admin API: token checks, validation, CRUD; without a configured token the policy routes answer 503', async () => {
  assert.equal((await admin('GET', '/admin/healthz')).status, 200);
  assert.equal((await admin('GET', '/admin/policies')).status, 403);
  assert.equal((await admin('GET', '/admin/policies', { token: 'wrong' })).status, 403);
  assert.equal((await admin('PUT', '/admin/policies/sbx-x', { token: 'wrong', body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [] } })).status, 403);
  assert.equal((await admin('GET', '/admin/policies/none', { token: ADMIN_TOKEN })).status, 404);

  const mismatch = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-y', address: '10.0.0.9', rules: [] } });
  assert.equal(mismatch.status, 400);
  const cidr = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [{ name: 'n', match: { host: '10.0.0.0/8' }, action: { allow: true } }] } });
  assert.equal(cidr.status, 400);
  assert.match(cidr.json.message, /CIDR/);
  const badAddress = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: 'nope', rules: [] } });
  assert.equal(badAddress.status, 400);
  const badFallback = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [], fallback: { allowInternetAccess: true, allowOut: ['x'], denyOut: [] } } });
  assert.equal(badFallback.status, 400);

  const put = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [{ match: { scheme: 'https' }, action: { allow: true, inject: [{ header: 'X-Key', secret: 'hidden-value' }] } }] } });
  assert.equal(put.status, 200);
  assert.equal(put.json.rules[0].action.inject[0].secret, REDACTED);
  assert.equal(proxy.store.get('sbx-x')?.rules[0].action.inject?.[0].secret, 'hidden-value');
  assert.equal((await admin('DELETE', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 204);
  assert.equal((await admin('DELETE', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 204);
  assert.equal((await admin('GET', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 404);

  const open = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'), auditLogPath: join(dir, 'second.jsonl'), logger: silentLogger(),
  });
  try {
    assert.equal(open.ready(), true, 'no policy source: ready at once');
    assert.equal((await admin('GET', '/admin/healthz', { port: open.adminPort })).status, 200);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort })).status, 503);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort, token: '' })).status, 503);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort, token: 'anything' })).status, 503);
    assert.equal(open.caPem, proxy.caPem, 'the same CA directory gives the same root');
  } finally {
    await open.close();
  }
});
