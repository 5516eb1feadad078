/**
 * The egress proxy forwarding what its rules allow: over TLS and plain HTTP, with bodies streamed
 * and every request recorded; deny rules, method filters, first match and wildcards; secrets
 * injected only when Host and SNI agree; the refusals before the policies load and for an unknown
 * sandbox; the records a failed TLS handshake leaves; an upgrade the upstream declines, and
 * CONNECT decided by the same rules. The fixture is testing/egress-proxy-fixture.ts.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { REDACTED } from '@svc/contracts/egress';
import {
  ADMIN_TOKEN, HTTP_PORT, HTTPS_PORT, SECRET, admin, auditFind, auditLines, call, dir, eventually, headerMap, listen, policySourceCalls, proxy,
  startEgressProxyFixture, stopEgressProxyFixture, upstreamConnections,
} from './testing/egress-proxy-fixture.ts';
import { captureClientHello } from './testing/client-hello-capture.ts';

// The first test watches the proxy become ready, so nothing here waits for it beforehand.
before(startEgressProxyFixture);
after(stopEgressProxyFixture);

test('not ready: every request is 403 until the policies are loaded (the source fails twice first)', async () => {
  assert.equal(proxy.ready(), false);
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', path: '/v1/items' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /not ready/);
  const h = await call({ scheme: 'http', host: 'plain.example.test', path: '/x' });
  assert.equal(h.status, 403);
  assert.deepEqual(upstreamConnections, before);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'not_ready', 'a not_ready security event');

  await eventually(() => proxy.ready(), 'the proxy to become ready', 5_000);
  assert.equal(policySourceCalls, 3);
  const health = await admin('GET', '/admin/healthz');
  assert.equal(health.status, 200);
  assert.equal(health.json.ready, true);
  assert.equal(health.json.policies, 1);
  assert.equal(health.json.tasks['policy-bootstrap'].failures, 2);
});

test('an allowed request is forwarded over TLS with the Host as sent; the record carries every field', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/items?page=2', headers: { 'x-client': 'c1', connection: 'keep-alive, x-hop', 'x-hop': '1' } });
  assert.equal(r.status, 200);
  assert.equal(r.headers['x-upstream'], 'yes');
  assert.equal(r.headers['x-hop'], undefined, 'a header the upstream listed in Connection is dropped');
  assert.equal(r.json.url, '/v1/items?page=2');
  const sent = headerMap(r.json.headers ?? []);
  assert.equal(sent.host, `api.example.test:${HTTPS_PORT}`);
  assert.equal(sent['x-client'], 'c1');
  assert.equal(sent['x-hop'], undefined);
  const rec = await auditFind((l) => l.path === '/v1/items?page=2' && l.type === undefined, 'the request record');
  assert.deepEqual(Object.keys(rec).sort(), ['bytes_in', 'bytes_out', 'cipher', 'dst_ip', 'dst_port', 'host', 'latency_ms', 'method', 'path', 'rule', 'sandbox_id', 'sandbox_ip',
    'scheme', 'status', 'tls_version', 'ts', 'upstream_addr', 'upstream_status'].sort());
  assert.equal(rec.sandbox_ip, '127.0.0.1');
  assert.equal(rec.sandbox_id, 'sbx-test');
  assert.equal(rec.dst_ip, '127.0.0.1');
  assert.equal(rec.dst_port, HTTPS_PORT);
  assert.equal(rec.scheme, 'https');
  assert.equal(rec.host, 'api.example.test');
  assert.equal(rec.method, 'GET');
  assert.equal(rec.status, 200);
  assert.equal(rec.upstream_status, '200');
  assert.equal(rec.upstream_addr, `127.0.0.1:${HTTPS_PORT}`);
  assert.equal(rec.bytes_out, Buffer.byteLength(r.text));
  assert.equal(rec.rule, 'api-get');
  assert.match(String(rec.tls_version), /^TLSv1\.[23]$/);
  assert.ok(String(rec.cipher).length > 0);
  assert.match(String(rec.ts), /[+-]\d{2}:\d{2}$/);
});

test('a request body streams through and is counted', async () => {
  const body = Buffer.alloc(300_000, 7);
  const r = await call({ host: 'api.example.test', path: '/v1/public/upload', method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
  assert.equal(r.status, 200);
  assert.equal(r.json.bodyBytes, body.length);
  const rec = await auditFind((l) => l.path === '/v1/public/upload', 'the upload record');
  assert.equal(rec.bytes_in, body.length);
  assert.equal(rec.rule, 'public-upload');
});

test('plain HTTP is forwarded; a rule with audit none writes no request record', async () => {
  const r = await call({ scheme: 'http', host: 'plain.example.test', path: '/over-http' });
  assert.equal(r.status, 200);
  const rec = await auditFind((l) => l.path === '/over-http', 'the http record');
  assert.equal(rec.tls_version, '');
  assert.equal(rec.cipher, '');
  assert.equal(rec.rule, 'plain-http');
  const q = await call({ scheme: 'http', host: 'quiet.example.test', path: '/quiet' });
  assert.equal(q.status, 200);
  await call({ scheme: 'http', host: 'plain.example.test', path: '/after-quiet' });
  await auditFind((l) => l.path === '/after-quiet', 'the record after');
  assert.equal((await auditLines()).some((l) => l.path === '/quiet'), false);
});

test('Connection listing Content-Length does not strip the framing: a body never becomes the next request on the pooled upstream connection', async () => {
  // A sandbox of one team smuggling a request into a connection the next request (maybe another
  // team's, with its injected secret) would complete.
  const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: plain.example.test\r\n\r\n';
  const outer = await call({ scheme: 'http', host: 'plain.example.test', method: 'POST', path: '/outer', headers: { connection: 'content-length' }, body: smuggled });
  assert.equal(outer.status, 200);
  assert.equal(outer.json.url, '/outer');
  assert.equal(outer.json.bodyBytes, smuggled.length, 'the body reached the upstream as the body');
  assert.equal(headerMap(outer.json.headers ?? [])['content-length'], String(smuggled.length));
  const next = await call({ scheme: 'http', host: 'plain.example.test', path: '/next' });
  assert.equal(next.json.url, '/next', 'the next request got its own answer');
});

test('denied by rule: 403 naming the rule, and the upstream never sees a connection', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', path: '/v1/admin/users' });
  assert.equal(r.status, 403);
  assert.deepEqual(r.json, { code: 403, message: 'egress denied by rule block-admin' });
  // A deny rule without a port covers every port, here the plain HTTP one.
  const h = await call({ scheme: 'http', host: 'api.example.test', port: HTTP_PORT, path: '/v1/admin/x' });
  assert.equal(h.status, 403);
  assert.deepEqual(upstreamConnections, before);
  const rec = await auditFind((l) => l.path === '/v1/admin/users', 'the denied record');
  assert.equal(rec.status, 403);
  assert.equal(rec.dst_ip, '');
  assert.equal(rec.upstream_addr, '');
  assert.equal(rec.rule, 'block-admin');
  assert.equal(rec.reason, 'deny_rule', 'the record says why it was refused');
});

test('an allow exception listed before a broad deny', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/admin/health' });
  assert.equal(r.status, 200);
  assert.equal((await call({ host: 'api.example.test', path: '/v1/admin/healthz' })).status, 403);
});

test('method filter: a method outside the list falls through to default deny', async () => {
  assert.equal((await call({ host: 'api.example.test', path: '/v1/items', method: 'HEAD' })).status, 200);
  const r = await call({ host: 'api.example.test', path: '/v1/items', method: 'DELETE' });
  assert.equal(r.status, 403);
  assert.equal(r.json.message, 'egress denied: no rule matched (default deny)');
  await auditFind((l) => l.type === 'security_event' && l.reason === 'default_deny' && l.method === 'DELETE', 'the default_deny event');
  const rec = await auditFind((l) => l.type === undefined && l.method === 'DELETE' && l.path === '/v1/items', 'the request record');
  assert.deepEqual([rec.status, rec.reason], [403, 'default_deny'], 'its request record says why too');
  const allowed = await auditFind((l) => l.type === undefined && l.method === 'HEAD' && l.path === '/v1/items', 'the allowed request\'s record');
  assert.equal(allowed.reason, undefined, 'an allowed request has no reason');
});

test('first match wins: an earlier deny shadows a later wildcard allow', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'shadow.deep.example.test', path: '/' });
  assert.equal(r.status, 403);
  assert.equal(r.json.message, 'egress denied by rule shadow');
  assert.deepEqual(upstreamConnections, before);
});

test('a wildcard covers subdomains at any depth but not the apex', async () => {
  const sub = await call({ host: 'a.b.deep.example.test', path: '/wild' });
  assert.equal(sub.status, 200);
  const before = { ...upstreamConnections };
  const apex = await call({ host: 'deep.example.test', path: '/wild' });
  assert.equal(apex.status, 403);
  assert.deepEqual(upstreamConnections, before);
});

test('inject: the upstream gets the secret in place of the client\'s header; no log or admin read shows it', async () => {
  const r = await call({ host: 'api.example.test', path: '/inject/whoami', headers: { authorization: 'Bearer client-made-up', 'AUTHORIZATION-x': 'keep' } });
  assert.equal(r.status, 200);
  const sent = r.json.headers ?? [];
  const auth = sent.filter((_, i) => i % 2 === 0 && sent[i].toLowerCase() === 'authorization').length;
  assert.equal(auth, 1, 'one Authorization header reaches the upstream');
  assert.equal(headerMap(sent).authorization, `Bearer ${SECRET}`);
  assert.equal(headerMap(sent)['authorization-x'], 'keep');
  const fired = await auditFind((l) => l.type === 'security_event' && l.reason === 'inject_fired', 'the inject_fired event');
  assert.equal(fired.rule, 'inject-api');
  assert.match(String(fired.detail), /Authorization/);
  const rec = await auditFind((l) => l.path === '/inject/whoami' && l.type === undefined, 'the inject request record');
  assert.deepEqual(rec.injected, ['Authorization']);
  const logText = await readFile(join(dir, 'log', 'svc-egress', 'access.jsonl'), 'utf8');
  assert.equal(logText.includes(SECRET), false);

  const one = await admin('GET', '/admin/policies/sbx-test', { token: ADMIN_TOKEN });
  assert.equal(one.status, 200);
  assert.equal(one.json.rules[0].action.inject[0].secret, REDACTED);
  const all = await admin('GET', '/admin/policies', { token: ADMIN_TOKEN });
  assert.equal(JSON.stringify(all.json).includes(SECRET), false);
  assert.equal(JSON.stringify(all.json).includes(REDACTED), true);
});

test('inject refuses when Host and SNI differ, and contacts nobody', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', servername: 'www.example.test', path: '/inject/x' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /does not match the TLS server name www\.example\.test/);
  assert.equal(r.text.includes(SECRET), false);
  assert.deepEqual(upstreamConnections, before);
  const ev = await auditFind((l) => l.type === 'security_event' && l.reason === 'host_sni_mismatch', 'the host_sni_mismatch event');
  assert.equal(ev.rule, 'inject-api');
  assert.equal(ev.sni, 'www.example.test');
});

test('an unknown sandbox address is refused', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/items', localAddress: '127.0.0.2' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /no egress policy for the sandbox at 127\.0\.0\.2/);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'unknown_sandbox' && l.sandbox_ip === '127.0.0.2', 'the unknown_sandbox event');
});

test('a client that aborts mid-handshake leaves a tls_handshake record', async () => {
  const hello = await captureClientHello('abort.example.test');
  await new Promise<void>((resolve, reject) => {
    const s = net.connect(proxy.httpsPort, '127.0.0.1', () => s.write(hello));
    s.once('data', () => { s.destroy(); resolve(); }); // the ServerHello came: leave now
    s.on('error', reject);
  });
  const rec = await auditFind((l) => l.type === 'tls_handshake' && l.sni === 'abort.example.test', 'the tls_handshake record');
  assert.match(String(rec.reason), /closed|handshake/);
  assert.equal(rec.sandbox_id, 'sbx-test');

  // A client that rejects the proxy's certificate (no CA) fails the handshake too.
  await new Promise<void>((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port: proxy.httpsPort, servername: 'distrust.example.test' });
    s.on('error', () => resolve());
  });
  await auditFind((l) => l.type === 'tls_handshake' && l.sni === 'distrust.example.test', 'the record of the refused certificate');
});

test('without SNI the leaf is made for the original destination IP', async () => {
  const r = await call({ host: '127.0.0.1', servername: null, path: '/by-ip' });
  assert.equal(r.status, 200);
  const rec = await auditFind((l) => l.path === '/by-ip', 'the by-ip record');
  assert.equal(rec.rule, 'by-ip');
});

test('an upgrade the upstream does not take comes back as its ordinary answer; CONNECT is decided by the rules', async () => {
  // The echo upstream has no upgrade handler: it answers the GET, and the proxy relays that (egress-tunnels.test.ts has the 101s).
  const up = await call({ host: 'api.example.test', path: '/ws', headers: { connection: 'Upgrade', upgrade: 'websocket' } });
  assert.equal(up.status, 200);
  assert.equal(up.json.url, '/ws');
  const answer = await new Promise<string>((resolve, reject) => {
    const s = net.connect(proxy.httpPort, '127.0.0.1', () => s.write('CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n'));
    let text = '';
    s.on('data', (c) => { text += c; });
    s.on('end', () => { s.end(); resolve(text); });
    s.on('error', reject);
  });
  // Its rules allow api.example.test on HTTPS_PORT only, and for GET and HEAD (egress-connect.test.ts has the tunnels).
  assert.match(answer, /^HTTP\/1\.1 403/);
});

