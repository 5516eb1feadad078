/**
 * What the data-plane proxy reports to the master as a sandbox's activity: only answers from
 * the sandbox (not the proxy's own 502s), bytes that move (not an open stream that carries only
 * envd keepalives), a WebSocket's frames (not the open connection), and only traffic that showed
 * a token where the sandbox has one (not envd's open /health and preflights).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import WebSocket from 'ws';
import { call, sandboxHost } from './testing/client.ts';
import { closeDataPlane, startDataPlane, type DataPlane } from './testing/data-plane-fixture.ts';
import { Upstream, type Platform } from './testing/harness.ts';

let plane: DataPlane;
let p: Platform;
let up: Upstream;

before(async () => { ({ p, up } = plane = await startDataPlane()); });
after(() => closeDataPlane(plane));

test('only an answer from the sandbox is activity: a poller of a closed port, answered 502 by the proxy, lets it idle', async () => {
  p.master.add({ sandboxId: 'polled', envdPort: up.port });
  const closed = new Upstream();
  const port = await closed.listen();
  await closed.close();
  const reported = () => p.master.calls.activity.filter((ids) => ids.includes('polled')).length;
  for (let i = 0; i < 5; i++) {
    const r = await call(p.proxy.httpUrl, { host: sandboxHost(port, 'polled'), path: '/health' });
    assert.equal(r.status, 502);
    await new Promise((res) => setTimeout(res, 100));
  }
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/`, { headers: { host: sandboxHost(port, 'polled') } });
  await new Promise<void>((resolve) => { ws.once('error', () => resolve()); ws.once('unexpected-response', () => resolve()); });
  ws.terminate();
  await new Promise((res) => setTimeout(res, 500)); // two flushes of the proxy under test
  assert.equal(reported(), 0, 'refused connections and the proxy\'s own 502s are not activity');
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'polled'), path: '/echo' });
  assert.equal(r.status, 200);
  await new Promise((res) => setTimeout(res, 500));
  assert.equal(reported(), 1, 'a service\'s answer is');
});

test('activity is bytes: an open stream that goes silent, or only carries envd keepalives, stops counting', async () => {
  const keepalive = Buffer.from([0, 0, 0, 0, 26, ...Buffer.from('{"event":{"keepalive":{}}}')]);
  let stop = () => {};
  p.master.add({ sandboxId: 'quiet', envdPort: up.port });
  up.custom = (req, res) => {
    if (req.url !== '/quiet') return false;
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.write('{"started":true}');
    const pings = setInterval(() => res.write(keepalive), 50);
    stop = () => { clearInterval(pings); res.end(); };
    return true;
  };
  const reported = () => p.master.calls.activity.filter((ids) => ids.includes('quiet')).length;
  const port = Number(new URL(p.proxy.httpUrl).port);
  const body = new Promise<Buffer>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/quiet', headers: { host: sandboxHost(up.port, 'quiet') } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve(Buffer.concat(parts)));
    });
    req.on('error', reject);
    req.end();
  });
  try {
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(reported() >= 1, 'the request and its first bytes are activity');
    const before = reported();
    await new Promise((r) => setTimeout(r, 1_000)); // five flushes of the proxy under test
    assert.equal(reported(), before, 'an open stream carrying only keepalives is idle');
  } finally {
    stop();
    up.custom = undefined;
  }
  assert.ok((await body).includes(keepalive), 'the keepalives still reach the client');
});

test('a WebSocket counts as activity only while frames move', async () => {
  p.master.add({ sandboxId: 'wsquiet', envdPort: up.port });
  const reported = () => p.master.calls.activity.filter((ids) => ids.includes('wsquiet')).length;
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/`, { headers: { host: sandboxHost(up.port, 'wsquiet') } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  try {
    ws.send('hello');
    await new Promise((resolve) => ws.once('message', resolve));
    await new Promise((r) => setTimeout(r, 500));
    const before = reported();
    assert.ok(before >= 1);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(reported(), before, 'an open, silent WebSocket is idle');
    ws.send('again');
    await new Promise((resolve) => ws.once('message', resolve));
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(reported() > before, 'a frame is activity again');
  } finally {
    ws.close();
  }
});

test('envd\'s /health and preflights without the envd token are answered but are not activity; with the token they are', async () => {
  p.master.add({ sandboxId: 'guarded', envdPort: up.port, envdAccessToken: 'envd-secret', trafficAccessToken: 'traffic-secret' });
  const reported = () => p.master.calls.activity.filter((ids) => ids.includes('guarded')).length;
  const envd = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'guarded'), method, path, headers, body });
  // Twice each: the first goes the cold path (route lookup), the second the cache hit.
  for (let i = 0; i < 2; i++) {
    assert.equal((await envd('GET', '/health')).status, 200);
    assert.equal((await envd('GET', '/health?probe=1')).status, 200);
    assert.equal((await envd('OPTIONS', '/process.Process/Start', { 'Access-Control-Request-Method': 'POST' })).status, 200);
    assert.equal((await envd('OPTIONS', '/files', { 'content-type': 'text/plain' }, 'a body is streamed, and not counted either')).status, 200);
  }
  await new Promise((r) => setTimeout(r, 500)); // two flushes of the proxy under test
  assert.equal(reported(), 0, 'nobody showed a token: the answers kept nothing awake');
  assert.equal((await envd('GET', '/health', { 'X-Access-Token': 'envd-secret' })).status, 200);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(reported(), 1, 'the owner\'s own /health, with the token, is activity');
});
