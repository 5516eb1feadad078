/**
 * A request's silence is limited, its length not: a sandbox that sends nothing for
 * requestIdleTimeoutMs is answered 504, a stalled upload ends its connection, and a stream whose
 * bytes keep coming outlasts the limit.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { call, sandboxHost } from './testing/client.ts';
import { waitFor } from './testing/data-plane-fixture.ts';
import { startPlatform, type Platform } from './testing/harness.ts';

const LIMIT_MS = 300;
let p: Platform;
let proxyPort: number;
let silent: Server;
let silentPort: number;
let trickle: Server;
let tricklePort: number;
const sockets = new Set<Socket>();

function listen(server: Server): Promise<number> {
  server.on('connection', (s) => { sockets.add(s); s.on('error', () => { /* closed by the proxy: part of the test */ }); });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

before(async () => {
  p = await startPlatform({ lifecycleReplicas: 1, tuning: { requestIdleTimeoutMs: LIMIT_MS, clientKeepAliveMs: LIMIT_MS } });
  proxyPort = Number(new URL(p.proxy.httpUrl).port);
  silent = createServer(() => { /* accepts, reads, never answers */ });
  silentPort = await listen(silent);
  // Answers with a chunk every LIMIT_MS / 3, five times: longer than the limit in all, never quiet for it.
  trickle = createServer((s) => s.once('data', () => {
    s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
    let n = 0;
    const t = setInterval(() => {
      if (++n <= 5) { s.write(`1\r\n${n}\r\n`); return; }
      clearInterval(t);
      s.end('0\r\n\r\n');
    }, LIMIT_MS / 3);
  }));
  tricklePort = await listen(trickle);
  p.master.add({ sandboxId: 'slow', envdPort: 49983 });
});
after(async () => {
  for (const s of sockets) s.destroy();
  silent.close();
  trickle.close();
  await p.close();
});

test('a sandbox that sends nothing is answered 504 in the JSON form after the request idle limit', async () => {
  const t0 = Date.now();
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(silentPort, 'slow') });
  assert.equal(r.status, 504);
  assert.equal(r.json().code, 504);
  assert.match(r.json<{ message: string }>().message, /sent nothing/);
  assert.ok(Date.now() - t0 >= LIMIT_MS - 20, `answered after ${Date.now() - t0} ms`);
});

test('an upload that stalls is answered 504 and its connection closes', async () => {
  const s = connect(proxyPort, '127.0.0.1');
  let text = '';
  let closed = false;
  s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
  s.on('close', () => { closed = true; });
  s.write(`POST / HTTP/1.1\r\nHost: ${sandboxHost(silentPort, 'slow')}\r\nContent-Length: 1000000\r\n\r\nabc`);
  await waitFor(() => closed, 5_000);
  assert.match(text, /^HTTP\/1\.1 504 /);
  assert.match(text, /\r\nConnection: close\r\n/i);
});

test('a streamed answer longer than the limit, never quiet for it, arrives whole', async () => {
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(tricklePort, 'slow') });
  assert.equal(r.status, 200);
  assert.equal(r.body, '12345');
});
