import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { ADMIN_TOKEN_HEADER } from '@svc/contracts/proxy-admin';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

let p: Platform;
let up: Upstream;

before(async () => {
  p = await startPlatform({ proxyAdminToken: 'tok' });
  up = new Upstream('sbx-m');
  await up.listen();
  p.master.add({ sandboxId: 'sbxm', envdPort: up.port });
});
after(async () => {
  await p.close();
  await up.close();
});

/** GET /metrics on the proxy's admin port with these headers: the status and each series' value. */
async function scrape(headers: Record<string, string> = { [ADMIN_TOKEN_HEADER]: 'tok' }) {
  const r = await call(p.proxy.adminUrl, { path: '/metrics', headers });
  const values = new Map<string, number>();
  for (const line of r.body.split('\n')) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) values.set(m[1]!, Number(m[2]));
  }
  return { ...r, value: (series: string) => values.get(series) ?? 0 };
}

test('GET /metrics on the admin port needs the admin token, in its header or as a bearer: none or another is 403', async () => {
  assert.equal((await scrape({})).status, 403);
  const wrong = await scrape({ [ADMIN_TOKEN_HEADER]: 'nope' });
  assert.equal(wrong.status, 403);
  assert.equal(wrong.json().code, 403);
  assert.equal((await scrape({ authorization: 'Bearer nope' })).status, 403);
  assert.equal((await scrape({ authorization: 'Bearer tok' })).status, 200, 'the token as a bearer: all an older Prometheus can send');
  const ok = await scrape();
  assert.equal(ok.status, 200);
  assert.match(String(ok.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.match(ok.body, /# TYPE svc_proxy_request_duration_seconds histogram\n/);
});

test('every data-plane request is counted by the status answered and timed; a client gone before the answer is 499', async () => {
  const before = await scrape();
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxm'), path: '/x' })).status, 200);
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxm'), path: '/y' })).status, 200);
  assert.equal((await call(p.proxy.httpUrl, { host: 'localhost:3002' })).status, 400, 'no sandbox named');
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(8000, 'nosuch') })).status, 404);

  // The sandbox never answers; the client leaves.
  let held = false;
  up.custom = (req) => { if (req.url !== '/hold') return false; held = true; return true; };
  const req = request({ host: '127.0.0.1', port: new URL(p.proxy.httpUrl).port, path: '/hold', headers: { host: sandboxHost(up.port, 'sbxm') }, agent: false });
  req.on('error', () => { /* destroyed below on purpose */ });
  req.end();
  while (!held) await new Promise((r) => setTimeout(r, 10));
  req.destroy();
  up.custom = undefined;

  const delta = async (series: string) => (await scrape()).value(series) - before.value(series);
  let gone = 0;
  for (let i = 0; i < 100 && gone === 0; i++) {
    gone = await delta('svc_proxy_requests_total{code="499"}');
    if (gone === 0) await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(gone, 1);
  assert.equal(await delta('svc_proxy_requests_total{code="200"}'), 2);
  assert.equal(await delta('svc_proxy_requests_total{code="400"}'), 1);
  assert.equal(await delta('svc_proxy_requests_total{code="404"}'), 1);
  assert.equal(await delta('svc_proxy_request_duration_seconds_count'), 5);
  assert.equal(await delta('svc_proxy_request_duration_seconds_bucket{le="+Inf"}'), 5);
  assert.ok(await delta('svc_proxy_request_duration_seconds_sum') > 0);
});
