import { after, before, beforeEach, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { ProxyAdminClient } from '@svc/contracts/proxy-admin';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

let p: Platform;
let up: Upstream;
const TOKEN = 'tat-5f0c8a7e-1b2c-4d3e-9f00-aabbccddeeff';

const ADMIN_TOKEN = 'gating-admin-token';

before(async () => {
  p = await startPlatform({ proxyAdminToken: ADMIN_TOKEN });
  up = new Upstream('sbx');
  await up.listen();
});
after(async () => {
  await p.close();
  await up.close();
});
beforeEach(() => {
  p.master.resetCalls();
  p.master.resumeDelayMs = 0;
  p.master.resumeFailure = undefined;
  p.master.onResumed = undefined;
});

const get = (sandboxId: string, headers: Record<string, string> = {}, path = '/echo') =>
  call(p.proxy.httpUrl, { host: sandboxHost(up.port, sandboxId), headers, path });

test('traffic token: missing or wrong is 403 on the cold path and on a cache hit; right is 200; never forwarded or logged', async () => {
  p.master.add({ sandboxId: 'tok', envdPort: 49983, trafficAccessToken: TOKEN });
  up.requests.length = 0;
  const cold = await get('tok');
  assert.equal(cold.status, 403);
  assert.equal(cold.json().code, 403);
  assert.equal((await get('tok', { 'ext-traffic-access-token': 'wrong' })).status, 403);
  assert.equal((await get('tok', { 'ext-traffic-access-token': TOKEN })).status, 200, 'cold path with token');
  const lookups = p.master.calls.route.length;
  for (const header of ['ext-traffic-access-token', 'svc-traffic-access-token', 'e2b-traffic-access-token']) {
    assert.equal((await get('tok', { [header]: TOKEN })).status, 200, `cache hit with ${header}`);
  }
  assert.equal(p.master.calls.route.length, lookups, 'served from the cache');
  assert.equal((await get('tok')).status, 403, 'cache hit without token');
  assert.equal((await get('tok', { 'svc-traffic-access-token': TOKEN.slice(0, -1) + 'x' })).status, 403, 'cache hit with wrong token');
  assert.equal(up.requests.length, 4);
  for (const r of up.requests) {
    assert.equal(JSON.stringify(r.rawHeaders).includes(TOKEN), false, 'token headers are stripped before forwarding');
  }
  assert.equal(p.logs.text().includes(TOKEN), false, 'the token never appears in a log line');
  assert.ok(p.logs.lines.length > 0, 'the capture does see logs');
});

test('traffic token on WebSocket upgrades: 403 without, echo with', async () => {
  p.master.add({ sandboxId: 'tokws', envdPort: 49983, trafficAccessToken: TOKEN });
  const wsUrl = `${p.proxy.httpUrl.replace('http', 'ws')}/ws`;
  for (const headers of [{}, { 'ext-traffic-access-token': 'nope' }]) {
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(wsUrl, { headers: { host: sandboxHost(up.port, 'tokws'), ...headers } });
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
      ws.once('open', () => reject(new Error('should not open')));
      ws.once('error', () => {});
    });
    assert.equal(status, 403);
  }
  const ws = new WebSocket(wsUrl, { headers: { host: sandboxHost(up.port, 'tokws'), 'e2b-traffic-access-token': TOKEN } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const reply = new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())));
  ws.send('x');
  assert.equal(await reply, 'sbx:x');
  ws.close();
  assert.equal(p.logs.text().includes(TOKEN), false);
});

test('the envd port is not behind the traffic token (envd checks its own access token, as in E2B)', async () => {
  p.master.add({ sandboxId: 'tokenvd', envdPort: up.port, trafficAccessToken: TOKEN });
  assert.equal((await get('tokenvd')).status, 200, 'cold path');
  assert.equal((await get('tokenvd')).status, 200, 'cache hit');
  const viaHeaders = await call(p.proxy.httpUrl, { headers: { 'e2b-sandbox-id': 'tokenvd', 'e2b-sandbox-port': String(up.port) }, path: '/echo' });
  assert.equal(viaHeaders.status, 200);
});

test('a request without the token does not wake a paused sandbox', async () => {
  p.master.add({ sandboxId: 'tokpaused', envdPort: 49983, trafficAccessToken: TOKEN, state: 'paused', autoResume: true });
  assert.equal((await get('tokpaused')).status, 403);
  assert.equal(p.master.calls.resume.length, 0);
});

test('envd\'s open paths (/health, preflights) do not wake a paused sandbox without the envd token, nor open an upgrade; with it they do', async () => {
  const ENVD_TOKEN = 'envd-token-of-the-paused-one';
  p.master.add({ sandboxId: 'napper', envdPort: up.port, envdAccessToken: ENVD_TOKEN, state: 'paused', autoResume: true });
  const envd = (method: string, path: string, headers: Record<string, string> = {}) =>
    call(p.proxy.httpUrl, { method, path, headers: { 'e2b-sandbox-id': 'napper', 'e2b-sandbox-port': String(up.port), ...headers } });
  for (const [method, path] of [['GET', '/health'], ['OPTIONS', '/process.Process/Start'], ['GET', '/health?x=1']]) {
    const r = await envd(method, path);
    assert.equal(r.status, 401, `${method} ${path}`);
    assert.match(r.json<{ message: string }>().message, /missing or wrong envd access token/);
  }
  assert.equal(p.master.calls.resume.length, 0, 'nothing woke it');
  // A pausing sandbox that becomes paused is checked again before the wake.
  p.master.add({ sandboxId: 'napper2', envdPort: up.port, envdAccessToken: ENVD_TOKEN, state: 'pausing', autoResume: true });
  setTimeout(() => p.master.set('napper2', { state: 'paused' }), 100);
  assert.equal((await call(p.proxy.httpUrl, { path: '/health', headers: { 'e2b-sandbox-id': 'napper2', 'e2b-sandbox-port': String(up.port) } })).status, 401);
  assert.equal(p.master.calls.resume.length, 0);

  assert.equal((await envd('GET', '/health', { 'x-access-token': ENVD_TOKEN })).status, 200, 'the token wakes it');
  assert.equal(p.master.calls.resume.length, 1);
  assert.equal((await envd('GET', '/health')).status, 200, 'running, /health is open again');
  // An upgrade on /health without the token is refused: the proxy would check nothing after it.
  const status = await new Promise<number>((resolve, reject) => {
    const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/health`, { headers: { 'e2b-sandbox-id': 'napper', 'e2b-sandbox-port': String(up.port) } });
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode!));
    ws.once('open', () => reject(new Error('the upgrade should be refused')));
    ws.once('error', () => {});
  });
  assert.equal(status, 401);
});

test('killed and timed-out sandboxes are 410 on their own ports and say not to retry', async () => {
  p.master.add({ sandboxId: 'dead', envdPort: 49983, state: 'terminated', terminateReason: 'timeout' });
  p.master.add({ sandboxId: 'dying', envdPort: 49983, state: 'killing' });
  const r = await get('dead');
  assert.equal(r.status, 410);
  assert.equal(r.json().code, 410);
  assert.match(r.json<{ message: string }>().message, /timed out.*do not retry/);
  assert.equal((await get('dying')).status, 410);
  const lookups = p.master.calls.route.length;
  assert.equal((await get('dead')).status, 410);
  assert.equal(p.master.calls.route.length, lookups, 'a cached terminated route answers without the master');
  // A sandbox killed while its running route sits in the cache: the master's purge after the kill drops it.
  p.master.add({ sandboxId: 'live', envdPort: 49983 });
  assert.equal((await get('live')).status, 200);
  p.master.set('live', { state: 'terminated', terminateReason: 'killed' });
  assert.equal((await get('live')).status, 200, 'still cached');
  await new ProxyAdminClient(p.proxy.adminUrl, ADMIN_TOKEN).purge(['live']);
  const killed = await get('live');
  assert.equal(killed.status, 410);
  assert.match(killed.json<{ message: string }>().message, /was killed/);
});

test('paused with autoResume: the request waits for the resume, and concurrent requests share one resume', async () => {
  p.master.add({ sandboxId: 'sleepy', envdPort: up.port, state: 'paused', autoResume: true });
  p.master.resumeDelayMs = 300;
  const started = Date.now();
  const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => get('sleepy', {}, `/echo?i=${i}`)));
  for (const r of replies) assert.equal(r.status, 200);
  assert.ok(Date.now() - started >= 300, 'the requests waited for the resume');
  assert.equal(p.master.calls.resume.length, 1);
  assert.deepEqual(p.master.calls.resume[0], { sandboxId: 'sleepy', reason: 'auto' });
  assert.equal(p.master.get('sleepy').state, 'running');
  assert.match(p.logs.text(), /"sandboxId":"sleepy"[^\n]*"msg":"auto-resumed sandbox"/);
});

test('requests naming a paused or killing sandbox cost one master look-up per cache TTL, not one each; the owner\'s request still wakes it', async () => {
  p.master.add({ sandboxId: 'hush', envdPort: 49983, trafficAccessToken: TOKEN, state: 'paused', autoResume: true });
  p.master.add({ sandboxId: 'ending', envdPort: 49983, state: 'killing' });
  for (const [id, status] of [['hush', 403], ['ending', 410]] as const) {
    p.master.resetCalls();
    for (let i = 0; i < 50; i++) assert.equal((await get(id)).status, status, id);
    assert.equal(p.master.calls.route.length, 1, `${id}: one look-up for 50 requests`);
  }
  assert.equal(p.master.calls.resume.length, 0, 'no request without the token woke it');
  const woken = await get('hush', { 'ext-traffic-access-token': TOKEN });
  assert.equal(woken.status, 200, 'the kept paused route leads to the resume, not to a stale refusal');
  assert.equal(p.master.calls.resume.length, 1);
});

test('paused without autoResume: 409 on its own ports, telling to resume with connect', async () => {
  p.master.add({ sandboxId: 'parked', envdPort: 49983, state: 'paused', autoResume: false });
  const r = await get('parked');
  assert.equal(r.status, 409);
  assert.match(r.json<{ message: string }>().message, /sandbox parked is paused; resume it with connect/);
  assert.equal(p.master.calls.resume.length, 0);
});

test('envd\'s port answers a sandbox that is not running with 502, as E2B\'s proxy does (the SDK reads it as not running)', async () => {
  p.master.add({ sandboxId: 'envd-dead', envdPort: up.port, state: 'terminated', terminateReason: 'timeout' });
  p.master.add({ sandboxId: 'envd-killed', envdPort: up.port, state: 'terminated', terminateReason: 'killed' });
  p.master.add({ sandboxId: 'envd-dying', envdPort: up.port, state: 'killing' });
  p.master.add({ sandboxId: 'envd-parked', envdPort: up.port, state: 'paused', autoResume: false });
  const cases: Array<[string, RegExp]> = [
    ['envd-dead', /not running: it timed out and was killed/],
    ['envd-killed', /not running: it was killed/],
    ['envd-dying', /not running/],
    ['envd-parked', /not running: it is paused; resume it with connect/],
  ];
  for (const [id, message] of cases) {
    const r = await get(id, {}, '/health');
    assert.equal(r.status, 502, id);
    assert.equal(r.json().code, 502);
    assert.match(r.json<{ message: string }>().message, message);
  }
  assert.equal(p.master.calls.resume.length, 0, 'nothing resumed');
  // An unknown sandbox: 502 on envd's port (the default one when no route is known), 404 elsewhere.
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(49983, 'nobody'), path: '/health' })).status, 502);
  assert.equal((await call(p.proxy.httpUrl, { headers: { 'e2b-sandbox-id': 'nobody' }, path: '/health' })).status, 502, 'no port named: envd');
  assert.equal((await call(p.proxy.httpUrl, { host: sandboxHost(8000, 'nobody') })).status, 404);
});

test('auto-resume failure: 503 with Retry-After, at once', async () => {
  p.master.add({ sandboxId: 'broken', envdPort: up.port, state: 'paused', autoResume: true });
  p.master.resumeFailure = { status: 500, message: 'node agent exploded' };
  const started = Date.now();
  const r = await get('broken');
  assert.equal(r.status, 503);
  assert.ok(r.headers['retry-after']);
  assert.ok(Date.now() - started < 1_000, `answered in ${Date.now() - started} ms`);
  assert.equal(r.json().code, 503);
  assert.equal(r.json<{ message: string }>().message.includes('exploded'), false, 'no internals in the answer');
});

test('auto-resume rejected by the master with 409 passes through as 409', async () => {
  p.master.add({ sandboxId: 'full', envdPort: up.port, state: 'paused', autoResume: true });
  p.master.resumeFailure = { status: 409, message: 'resume rejected by paused_resource_release_ratio policy: need 512MB > quota 256MB' };
  const r = await get('full');
  assert.equal(r.status, 409);
  assert.match(r.json<{ message: string }>().message, /paused_resource_release_ratio/);
  assert.ok(r.headers['retry-after']);
});

test('no lifecycle replica reachable: 503 with Retry-After, at once', async () => {
  const q = await startPlatform({ lifecycleReplicas: 1, lifecycleUrls: ['http://127.0.0.1:9', 'http://127.0.0.1:7'] });
  try {
    q.master.add({ sandboxId: 'orphan', envdPort: up.port, state: 'paused', autoResume: true });
    const started = Date.now();
    const r = await call(q.proxy.httpUrl, { host: sandboxHost(up.port, 'orphan') });
    assert.equal(r.status, 503);
    assert.ok(r.headers['retry-after']);
    assert.ok(Date.now() - started < 1_000);
  } finally {
    await q.close();
  }
});

test('pausing or resuming: the request waits briefly, then is served', async () => {
  p.master.add({ sandboxId: 'moving', envdPort: up.port, state: 'resuming' });
  setTimeout(() => p.master.set('moving', { state: 'running' }), 250);
  const r = await get('moving');
  assert.equal(r.status, 200);
  // pausing with autoResume: waits for paused, then resumes.
  p.master.add({ sandboxId: 'dozing', envdPort: up.port, state: 'pausing', autoResume: true });
  setTimeout(() => p.master.set('dozing', { state: 'paused' }), 200);
  const r2 = await get('dozing');
  assert.equal(r2.status, 200);
  assert.equal(p.master.calls.resume.filter((c) => c.sandboxId === 'dozing').length, 1);
});

test('a sandbox that stays pausing is answered with 503 within the bound', async () => {
  const q = await startPlatform({ tuning: { settleWaitMs: 300 } });
  try {
    q.master.add({ sandboxId: 'stuck', envdPort: up.port, state: 'pausing' });
    const started = Date.now();
    const r = await call(q.proxy.httpUrl, { host: sandboxHost(up.port, 'stuck') });
    assert.equal(r.status, 503);
    assert.ok(r.headers['retry-after']);
    assert.ok(Date.now() - started < 1_000);
  } finally {
    await q.close();
  }
});

test('connection refused on a cached running route: re-resolved once, auto-resumed at its new address', async () => {
  const before = new Upstream('before');
  await before.listen();
  p.master.add({ sandboxId: 'mover', envdPort: before.port, autoResume: true });
  const r1 = await call(p.proxy.httpUrl, { host: 'localhost', headers: { 'E2b-Sandbox-Id': 'mover' } });
  assert.equal(r1.json().upstream, 'before');
  // The sandbox pauses behind the proxy's back (no event, cache still says running) and
  // its old backend disappears; resume brings it up on another port.
  await before.close();
  p.master.set('mover', { state: 'paused' });
  p.master.onResumed = (sb) => { sb.envdPort = up.port; };
  const r2 = await call(p.proxy.httpUrl, { host: 'localhost', headers: { 'E2b-Sandbox-Id': 'mover' } });
  assert.equal(r2.status, 200);
  assert.equal(r2.json().upstream, 'sbx');
  assert.equal(p.master.calls.resume.length, 1);
});
