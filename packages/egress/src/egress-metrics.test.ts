import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

// The sandbox is 127.0.0.1; the one upstream listens there too, reached by name through `resolve`.
const TOKEN = 'egress-admin-token';
let dir: string;
let upstream: http.Server;
let upstreamPort: number;
let proxy: EgressProxy;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-metrics-'));
  upstream = http.createServer((_req, res) => res.end('ok'));
  upstreamPort = await new Promise<number>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve((upstream.address() as net.AddressInfo).port)));
  proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: TOKEN,
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'access.jsonl'),
    resolve: { 'allowed.test': '127.0.0.1', 'denied.test': '127.0.0.1' },
    logger: silentLogger(),
  });
  proxy.store.put({
    sandboxId: 'sbx-metrics', address: '127.0.0.1',
    rules: [
      // An allow rule without a port covers only port 80; the upstream's is another.
      { name: 'allowed', match: { scheme: 'http', port: upstreamPort, host: 'allowed.test' }, action: { allow: true } },
      { name: 'denied', match: { host: 'denied.test' }, action: { allow: false } },
    ],
  });
});

after(async () => {
  await proxy?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

async function scrape(headers: Record<string, string> = { [EGRESS_ADMIN_TOKEN_HEADER]: TOKEN }) {
  const res = await fetch(`http://127.0.0.1:${proxy.adminPort}/metrics`, { headers });
  const body = await res.text();
  const value = (decision: string) => Number(new RegExp(`^svc_egress_requests_total\\{decision="${decision}"\\} (\\S+)$`, 'm').exec(body)?.[1] ?? 0);
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', body, value };
}

/** One request from the sandbox with this Host; the status the proxy answered. */
function send(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxy.httpPort, path: '/', headers: { host: `${host}:${upstreamPort}` }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** An HTTP/1.0 request without a Host: no upstream can be read from it. */
function sendWithoutHost(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxy.httpPort, '127.0.0.1', () => s.write('GET / HTTP/1.0\r\n\r\n'));
    let text = '';
    s.on('data', (c: Buffer) => { text += c.toString(); });
    s.on('end', () => resolve(text.split('\r\n')[0] ?? ''));
    s.on('error', reject);
  });
}

test('GET /metrics on the egress admin port needs the admin token, in its header or as a bearer: none or another is 403', async () => {
  assert.equal((await scrape({})).status, 403);
  assert.equal((await scrape({ [EGRESS_ADMIN_TOKEN_HEADER]: 'nope' })).status, 403);
  assert.equal((await scrape({ authorization: 'Bearer nope' })).status, 403);
  assert.equal((await scrape({ authorization: `Bearer ${TOKEN}` })).status, 200, 'the token as a bearer: all an older Prometheus can send');
  const ok = await scrape();
  assert.equal(ok.status, 200);
  assert.match(ok.contentType, /^text\/plain; version=0\.0\.4/);
  for (const decision of ['allow', 'deny', 'invalid']) assert.match(ok.body, new RegExp(`^svc_egress_requests_total\\{decision="${decision}"\\} \\d+$`, 'm'));
});

test('GET /metrics on the egress admin port with no token configured refuses everyone (503), as the policy routes', async () => {
  const closed = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'ca'), auditLogPath: join(dir, 'closed.jsonl'), logger: silentLogger(),
  });
  try {
    const r = await fetch(`http://127.0.0.1:${closed.adminPort}/metrics`, { headers: { [EGRESS_ADMIN_TOKEN_HEADER]: 'anything' } });
    assert.equal(r.status, 503);
  } finally {
    await closed.close();
  }
});

test('each request out of a sandbox is counted by the policy\'s decision: allow, deny, invalid', async () => {
  const before = await scrape();
  assert.equal(await send('allowed.test'), 200);
  assert.equal(await send('allowed.test'), 200);
  assert.equal(await send('denied.test'), 403);
  assert.equal(await send('unlisted.test'), 403, 'the default deny');
  assert.match(await sendWithoutHost(), / 400 /);
  // Counted when each answer closes: wait for the last.
  let after = await scrape();
  for (let i = 0; i < 100 && after.value('invalid') === before.value('invalid'); i++) {
    await new Promise((r) => setTimeout(r, 10));
    after = await scrape();
  }
  assert.equal(after.value('allow') - before.value('allow'), 2);
  assert.equal(after.value('deny') - before.value('deny'), 2);
  assert.equal(after.value('invalid') - before.value('invalid'), 1);
});
