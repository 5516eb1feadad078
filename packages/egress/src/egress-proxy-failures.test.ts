/**
 * The egress proxy when things go wrong upstream or at the client: an untrusted certificate, a
 * refused connection and an unknown name are 502s naming the host; silent upstreams are 504s at
 * the connect and idle timeouts; an upstream that dies mid-body cuts the answer short; and a
 * thousand mixed requests, aborted ones among them, leak no sockets or descriptors. The fixture
 * is testing/egress-proxy-fixture.ts.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { silentLogger } from '@svc/common';
import { startEgressProxy } from './egress-proxy.ts';
import {
  DOWN_PORT, HTTP_PORT, HTTPS_PORT, UNTRUSTED_PORT, auditFind, call, dir, eventually, listen, openUpstreamRequests, proxy, request, rules, sandboxPolicy,
  startEgressProxyFixture, stopEgressProxyFixture, type Call,
} from './testing/egress-proxy-fixture.ts';

before(async () => {
  await startEgressProxyFixture();
  // The policy source fails twice first (egress-proxy-forwarding.test.ts watches that); these tests start once it has answered.
  await eventually(() => proxy.ready(), 'the proxy to become ready', 5_000);
});
after(stopEgressProxyFixture);

test('upstream failures: untrusted certificate 502, refused 502, unknown name 502; each names the host', async () => {
  const u = await call({ host: 'untrusted.example.test', port: UNTRUSTED_PORT, path: '/' });
  assert.equal(u.status, 502);
  assert.match(u.json.message ?? '', /untrusted\.example\.test presented a certificate that is not trusted/);
  const d = await call({ host: 'down.example.test', port: DOWN_PORT, path: '/' });
  assert.equal(d.status, 502);
  assert.match(d.json.message ?? '', /down\.example\.test .* refused the connection/);
  await proxy.store.put({ ...sandboxPolicy(), rules: [...rules(), { name: 'nowhere', match: { scheme: 'https', host: 'nowhere.invalid' }, action: { allow: true } }] });
  try {
    const n = await call({ host: 'nowhere.invalid', port: 443, path: '/' });
    assert.equal(n.status, 502);
    assert.match(n.json.message ?? '', /cannot resolve upstream host nowhere\.invalid/);
  } finally {
    proxy.store.put(sandboxPolicy());
  }
});

test('timeouts: a silent upstream handshake is a 504 at the connect timeout, a silent response a 504 at the idle timeout', async () => {
  const silent = net.createServer(() => { /* accepts and says nothing, not even a ServerHello */ });
  const silentPort = await listen(silent);
  const quick = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'), auditLogPath: join(dir, 'quick.jsonl'), logger: silentLogger(),
    resolve: { 'silent.example.test': '127.0.0.1', 'plain.example.test': '127.0.0.1' }, connectTimeoutMs: 300, ioTimeoutMs: 500,
  });
  try {
    quick.store.put({ sandboxId: 'sbx-quick', address: '127.0.0.1', rules: [
      { name: 'silent', match: { scheme: 'https', port: silentPort, host: 'silent.example.test' }, action: { allow: true } },
      { name: 'plain', match: { scheme: 'http', port: HTTP_PORT, host: 'plain.example.test' }, action: { allow: true } },
    ] });
    const viaQuick = (c: Call & { port: number }) => request({ ...c, proxyPort: c.scheme === 'http' ? quick.httpPort : quick.httpsPort, ca: quick.caPem });
    const t0 = Date.now();
    const connect = await viaQuick({ host: 'silent.example.test', port: silentPort, path: '/' });
    assert.equal(connect.status, 504);
    assert.match(connect.json.message ?? '', /silent\.example\.test .* did not complete the connection within 0\.3 s/);
    assert.ok(Date.now() - t0 < 3_000);
    const idle = await viaQuick({ scheme: 'http', host: 'plain.example.test', port: HTTP_PORT, path: '/hang-idle' });
    assert.equal(idle.status, 504);
    assert.match(idle.json.message ?? '', /plain\.example\.test .* sent and took nothing for 0\.5 s/);
    await eventually(() => openUpstreamRequests === 0 || undefined, 'the upstream request to be closed');
  } finally {
    await quick.close();
    silent.close();
  }
});

test('an upstream that dies mid-body cuts the sandbox\'s response short', async () => {
  await assert.rejects(call({ scheme: 'http', host: 'plain.example.test', path: '/die' }), /aborted|ECONNRESET|socket hang up/);
  const rec = await auditFind((l) => l.path === '/die', 'the record of the cut response');
  assert.equal(rec.upstream_status, '200');
  assert.equal(rec.bytes_out, 'only part'.length);
});

test('1,000 requests (keep-alive, new connections, denied, aborted) leak no sockets or descriptors', async () => {
  const fds = () => readdirSync('/proc/self/fd').length;
  const round = async (n: number) => {
    const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 4 });
    const kinds: Array<() => Promise<unknown>> = [
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/ka', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/ka', agent: httpsAgent }),
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/ka', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/new' }),
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/new' }),
      () => call({ host: 'api.example.test', path: '/v1/admin/x', agent: httpsAgent }),
      () => call({ scheme: 'http', host: 'example.test', path: '/denied', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/v1/items', method: 'POST', body: 'x'.repeat(1000), agent: httpsAgent }),
      () => aborted({ host: 'api.example.test', path: '/hang' }, 'before-response'),
      () => aborted({ scheme: 'http', host: 'plain.example.test', path: '/slow' }, 'mid-body'),
    ];
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        await kinds[i % kinds.length]();
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    httpAgent.destroy();
    httpsAgent.destroy();
    await eventually(() => openUpstreamRequests === 0 || undefined, 'the upstream to see every aborted request closed');
  };
  await round(100); // warms the pools up to their working size
  await new Promise((r) => setTimeout(r, 200));
  const fdsBefore = fds();
  const t0 = performance.now();
  await round(1000);
  const elapsed = performance.now() - t0;
  const fdsAfter = await eventually(async () => {
    const n = fds();
    return n <= fdsBefore + 8 ? n : undefined;
  }, `descriptors to settle (before: ${fdsBefore}, now: ${fds()})`, 5_000);
  console.log(`# 1,000 mixed requests in ${Math.round(elapsed)} ms; descriptors ${fdsBefore} before, ${fdsAfter} after`);
});

/** A request the client gives up on: before any response, or after the first body bytes. */
function aborted(c: Call, when: 'before-response' | 'mid-body'): Promise<void> {
  const scheme = c.scheme ?? 'https';
  return new Promise((resolve) => {
    const req = (scheme === 'https' ? https : http).request({
      host: '127.0.0.1',
      port: scheme === 'https' ? proxy.httpsPort : proxy.httpPort,
      path: c.path,
      headers: { host: `${c.host}:${scheme === 'https' ? HTTPS_PORT : HTTP_PORT}` },
      agent: false,
      ...(scheme === 'https' ? { ca: proxy.caPem, servername: c.host } : {}),
    }, (res) => {
      res.once('data', () => { req.destroy(); resolve(); });
    });
    req.on('error', () => resolve()); // the abort itself surfaces here
    req.end();
    if (when === 'before-response') setTimeout(() => { req.destroy(); resolve(); }, 30);
  });
}
