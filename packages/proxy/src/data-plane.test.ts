import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Agent, request } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import WebSocket from 'ws';
import { uploadThenRead } from '@svc/common/upload-then-read';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

let p: Platform;
let up: Upstream;
let other: Upstream;

before(async () => {
  p = await startPlatform();
  up = new Upstream('sbx-a');
  other = new Upstream('sbx-b');
  await up.listen();
  await other.listen();
  p.master.add({ sandboxId: 'sbxa', envdPort: up.port });
  p.master.add({ sandboxId: 'sbxb', envdPort: other.port });
});
after(async () => {
  await p.close();
  await up.close();
  await other.close();
});

test('routes by Host <port>-<sandboxID>.<domain>, the Host port ignored', async () => {
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'sbxa'), path: '/echo?x=1' });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json(), { upstream: 'sbx-a', method: 'GET', url: '/echo?x=1', body: '' });
  const r2 = await call(p.proxy.httpUrl, { host: `${other.port}-sbxb.example.com`, path: '/' });
  assert.equal(r2.json().upstream, 'sbx-b');
});

test('routes by the E2b-Sandbox-Id / E2b-Sandbox-Port headers the e2b SDK sends', async () => {
  const r = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  assert.equal(r.status, 200);
  assert.equal(r.json().upstream, 'sbx-b');
  // Without a port header the sandbox's envd port is used.
  const r2 = await call(p.proxy.httpUrl, { host: 'localhost:3002', path: '/h', headers: { 'E2b-Sandbox-Id': 'sbxa' } });
  assert.equal(r2.json().upstream, 'sbx-a');
});

test('a request naming no sandbox is 400 and an unknown sandbox 404, both {code, message}', async () => {
  const r = await call(p.proxy.httpUrl, { host: 'localhost:3002' });
  assert.equal(r.status, 400);
  assert.equal(r.json().code, 400);
  assert.match(r.json<{ message: string }>().message, /E2b-Sandbox-Id/);
  // A user port; envd's port answers 502 for a sandbox that is not there (gating.test.ts).
  const r2 = await call(p.proxy.httpUrl, { host: sandboxHost(8000, 'nosuch') });
  assert.equal(r2.status, 404);
  assert.deepEqual(r2.json(), { code: 404, message: 'sandbox nosuch not found' });
  assert.equal(Object.keys(r2.headers).some((h) => /retcode/i.test(h)), false);
});

test('a sandbox port with nothing listening is 502', async () => {
  const closed = new Upstream();
  const port = await closed.listen();
  await closed.close();
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(port, 'sbxa') });
  assert.equal(r.status, 502);
  assert.match(r.json<{ message: string }>().message, new RegExp(`nothing listens on port ${port}`));
});

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

test('adds X-Forwarded-*, drops hop-by-hop headers, keeps the rest', async () => {
  up.requests.length = 0;
  const r = await call(p.proxy.httpUrl, {
    host: sandboxHost(up.port, 'sbxa'), path: '/hdr',
    headers: { 'X-Forwarded-For': '10.1.1.1', 'Proxy-Authorization': 'Basic x', 'X-Custom': 'kept', Connection: 'keep-alive, X-Drop-Me', 'X-Drop-Me': '1', 'X-Access-Token': 'envd' },
  });
  assert.equal(r.status, 200);
  const h = up.requests[0].headers;
  assert.equal(h['x-forwarded-for'], '10.1.1.1, 127.0.0.1');
  assert.equal(h['x-forwarded-proto'], 'http');
  assert.equal(h['x-forwarded-host'], sandboxHost(up.port, 'sbxa'));
  assert.equal(h['x-custom'], 'kept');
  assert.equal(h['x-access-token'], 'envd');
  assert.equal(h['proxy-authorization'], undefined);
  assert.equal(h['x-drop-me'], undefined);
  assert.equal(h.host, sandboxHost(up.port, 'sbxa'));
});

test('keep-alive: one client connection and one backend connection serve many requests', async () => {
  const fresh = new Upstream('ka');
  await fresh.listen();
  p.master.add({ sandboxId: 'sbxka', envdPort: fresh.port });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let clientSockets = 0;
  for (let i = 0; i < 10; i++) {
    const r = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: new URL(p.proxy.httpUrl).port, path: `/k${i}`, agent, headers: { host: sandboxHost(fresh.port, 'sbxka') } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('socket', (s) => { if (!(s as unknown as { _svcSeen?: boolean })._svcSeen) { clientSockets++; (s as unknown as { _svcSeen?: boolean })._svcSeen = true; } });
      req.on('error', reject);
      req.end();
    });
    assert.equal(r, 200);
  }
  agent.destroy();
  assert.equal(clientSockets, 1);
  assert.equal(fresh.connections, 1);
  await fresh.close();
});

test('a streamed response reaches the client chunk by chunk, unbuffered', async () => {
  up.armStream();
  const port = Number(new URL(p.proxy.httpUrl).port);
  const firstChunk = await new Promise<{ first: string; rest: Promise<string>; headers: Record<string, unknown> }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/stream', headers: { host: sandboxHost(up.port, 'sbxa') } }, (res) => {
      let rest = '';
      const done = new Promise<string>((r) => res.on('end', () => r(rest)));
      res.once('data', (c: Buffer) => {
        res.on('data', (d: Buffer) => { rest += d.toString(); });
        resolve({ first: c.toString(), rest: done, headers: res.headers });
      });
    });
    req.on('error', reject);
    req.end();
  });
  // The upstream has not sent its last chunk yet: it waits for releaseStream().
  assert.equal(firstChunk.first, 'first;');
  assert.equal(firstChunk.headers['transfer-encoding'], 'chunked');
  up.releaseStream();
  assert.equal(await firstChunk.rest, 'last');
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

test('a request body is streamed to the sandbox as it is sent', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const seen: string[] = [];
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/upload', headers: { host: sandboxHost(up.port, 'sbxa'), 'transfer-encoding': 'chunked' } });
  const done = new Promise<void>((resolve, reject) => {
    req.on('response', (res) => {
      res.on('data', (c: Buffer) => seen.push(c.toString()));
      res.on('end', () => resolve());
    });
    req.on('error', reject);
  });
  req.write('one');
  await waitFor(() => seen.join('').includes('got:one;'));
  req.write('two');
  await waitFor(() => seen.join('').includes('got:two;'));
  req.end();
  await done;
  assert.equal(seen.join(''), 'got:one;got:two;end');
});

test('a backend that answers before reading the upload: the client, kept alive or closing, reads the answer after its whole upload', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const body = Buffer.alloc(8 * 1024 * 1024, 'x');
  up.custom = (req, res) => {
    if (req.url !== '/too-big') return false;
    // Answers at once and then reads the rest (as envd does for an oversized /init).
    res.writeHead(413, { 'content-type': 'application/json', 'content-length': '17' });
    res.end('{"code":413,"m":1}'.slice(0, 17));
    req.resume();
    return true;
  };
  try {
    // A client that sends its whole upload before it reads anything, on a connection it closes
    // after this request: the answer must survive until then (a reset would discard it).
    for (let i = 0; i < 3; i++) {
      const answer = await uploadThenRead({ port, method: 'POST', path: '/too-big', headers: { Host: sandboxHost(up.port, 'sbxa') }, body });
      assert.equal(answer, 'HTTP/1.1 413 Payload Too Large', `#${i}`);
    }
  } finally {
    up.custom = undefined;
  }
});

test('POST with Content-Length arrives whole', async () => {
  const r = await call(p.proxy.httpUrl, { method: 'POST', host: sandboxHost(up.port, 'sbxa'), path: '/echo', body: 'hello body', headers: { 'content-type': 'text/plain' } });
  assert.equal(r.json().body, 'hello body');
});

test('a WebSocket echoes through the proxy', async () => {
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { host: sandboxHost(up.port, 'sbxa') } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const replies: string[] = [];
  ws.on('message', (d) => replies.push(d.toString()));
  ws.send('ping-1');
  ws.send('ping-2');
  await waitFor(() => replies.length === 2);
  assert.deepEqual(replies, ['sbx-a:ping-1', 'sbx-a:ping-2']);
  ws.close();
});

test('closing the proxy closes open WebSockets instead of waiting for them', async () => {
  const q = await startPlatform();
  try {
    q.master.add({ sandboxId: 'wsclose', envdPort: up.port });
    const ws = new WebSocket(`${q.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { 'E2b-Sandbox-Id': 'wsclose' } });
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    const closed = new Promise((resolve) => ws.once('close', resolve));
    const t0 = Date.now();
    await q.close();
    await closed;
    assert.ok(Date.now() - t0 < 2_000);
  } catch (err) {
    await q.close().catch(() => { /* closed already by the test */ });
    throw err;
  }
});

test('a WebSocket by the e2b headers reaches the named sandbox', async () => {
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/ws`, { headers: { 'E2b-Sandbox-Id': 'sbxb', 'E2b-Sandbox-Port': String(other.port) } });
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  const reply = new Promise<string>((resolve) => ws.once('message', (d) => resolve(d.toString())));
  ws.send('hi');
  assert.equal(await reply, 'sbx-b:hi');
  ws.close();
});

test('an upgrade to a sandbox that does not exist gets a JSON 404 on the raw socket', async () => {
  const port = Number(new URL(p.proxy.httpUrl).port);
  const text = await new Promise<string>((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let buf = '';
    s.on('data', (d) => { buf += d.toString(); });
    s.on('end', () => resolve(buf));
    s.on('error', reject);
    s.write(`GET /ws HTTP/1.1\r\nHost: ${sandboxHost(8000, 'ghost')}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
  });
  assert.match(text, /^HTTP\/1\.1 404 Not Found\r\n/);
  assert.match(text, /\{"code":404,"message":"sandbox ghost not found"\}$/);
});

/** A raw backend: the first connection answers once, then drops the next request unanswered. */
async function flakyKeepAliveBackend() {
  let connections = 0;
  const server = createServer((sock: Socket) => {
    const n = ++connections;
    let requests = 0;
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      while (buf.includes('\r\n\r\n')) {
        buf = buf.slice(buf.indexOf('\r\n\r\n') + 4);
        requests++;
        if (n === 1 && requests === 2) { sock.destroy(); return; }
        const body = n === 1 ? 'first' : 'fresh';
        sock.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      }
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, connections: () => connections };
}

test('a pooled connection the backend drops under a new request is retried on a fresh one', async () => {
  const b = await flakyKeepAliveBackend();
  p.master.add({ sandboxId: 'flaky', envdPort: b.port });
  const h = { 'E2b-Sandbox-Id': 'flaky' };
  assert.equal((await call(p.proxy.httpUrl, { headers: h })).body, 'first');
  const r = await call(p.proxy.httpUrl, { headers: h });
  assert.equal(r.status, 200);
  assert.equal(r.body, 'fresh');
  assert.equal(b.connections(), 2);
  b.server.close();
});

test('a backend answering Connection: close gets a new connection next time; trailers are relayed', async () => {
  const closing = new Upstream('closing');
  closing.custom = (req, res) => {
    if (req.url === '/close') { res.setHeader('Connection', 'close'); res.end('bye'); return true; }
    if (req.url === '/trailers') {
      res.writeHead(200, { 'Trailer': 'X-Checksum', 'Content-Type': 'text/plain' });
      res.write('data');
      res.addTrailers({ 'X-Checksum': 'abc123' });
      res.end();
      return true;
    }
    return false;
  };
  await closing.listen();
  p.master.add({ sandboxId: 'closing', envdPort: closing.port });
  const h = { 'E2b-Sandbox-Id': 'closing' };
  assert.equal((await call(p.proxy.httpUrl, { headers: h, path: '/close' })).body, 'bye');
  assert.equal((await call(p.proxy.httpUrl, { headers: h, path: '/close' })).body, 'bye');
  assert.equal(closing.connections, 2);
  const port = Number(new URL(p.proxy.httpUrl).port);
  const trailers = await new Promise<Record<string, string | undefined>>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/trailers', headers: h }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.trailers));
    });
    req.on('error', reject);
    req.end();
  });
  assert.deepEqual(trailers, { 'x-checksum': 'abc123' });
  await closing.close();
});

test('HEAD answers pass through without a body', async () => {
  const r = await call(p.proxy.httpUrl, { method: 'HEAD', host: sandboxHost(up.port, 'sbxa'), path: '/echo' });
  assert.equal(r.status, 200);
  assert.ok(Number(r.headers['content-length']) > 0);
  assert.equal(r.body, '');
});

test('large bodies both ways survive backpressure intact', async () => {
  const big = new Upstream('big');
  const download = Buffer.alloc(16 * 1024 * 1024);
  for (let i = 0; i < download.length; i += 4096) download.writeUInt32BE(i, i);
  big.custom = (req, res) => {
    if (req.url === '/download') { res.writeHead(200, { 'content-length': download.length }); res.end(download); return true; }
    if (req.url === '/upload-hash') {
      const h = createHash('sha256');
      let n = 0;
      req.on('data', (c: Buffer) => { h.update(c); n += c.length; });
      req.on('end', () => res.end(JSON.stringify({ n, sha: h.digest('hex') })));
      return true;
    }
    return false;
  };
  await big.listen();
  p.master.add({ sandboxId: 'big', envdPort: big.port });
  const port = Number(new URL(p.proxy.httpUrl).port);
  const got = await new Promise<Buffer>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/download', headers: { 'E2b-Sandbox-Id': 'big' } }, (res) => {
      const chunks: Buffer[] = [];
      // A slow reader: pause now and then so the proxy must hold the backend back.
      res.on('data', (c: Buffer) => { chunks.push(c); if (chunks.length % 50 === 0) { res.pause(); setTimeout(() => res.resume(), 5); } });
      res.on('end', () => resolve(Buffer.concat(chunks)));
    });
    req.on('error', reject);
    req.end();
  });
  assert.equal(got.length, download.length);
  assert.ok(got.equals(download));
  for (const chunked of [false, true]) {
    const reply = await new Promise<{ n: number; sha: string }>((resolve, reject) => {
      const headers: Record<string, string> = { 'E2b-Sandbox-Id': 'big' };
      if (!chunked) headers['content-length'] = String(download.length);
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/upload-hash', headers }, (res) => {
        let body = '';
        res.on('data', (d) => { body += d; });
        res.on('end', () => resolve(JSON.parse(body)));
      });
      req.on('error', reject);
      for (let i = 0; i < download.length; i += 1024 * 1024) req.write(download.subarray(i, i + 1024 * 1024));
      req.end();
    });
    assert.equal(reply.n, download.length);
    assert.equal(reply.sha, createHash('sha256').update(download).digest('hex'), chunked ? 'chunked upload' : 'content-length upload');
  }
  await big.close();
});

async function waitFor(cond: () => boolean, timeoutMs = 3_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
