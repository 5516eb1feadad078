import { test as nodeTest, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { hasContentLength, InvalidHeaderError, requestHead } from './request-head.ts';
import { UpstreamPool, type Dial, type DialedSocket, type ResponseSink, type UpstreamConnection, type UpstreamConnectionError } from './upstream-pool.ts';

/** A broken pool fails a test in 5 s rather than hang on an exchange that never settles. */
const test = (name: string, fn: (t: TestContext) => Promise<void> | void) => nodeTest(name, { timeout: 5000 }, fn);

const HOST = '127.0.0.1';
const GET = requestHead('GET', '/', ['Host', 'backend']);
const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

interface Outcome {
  /** Every callback in order, so a doubled or missing one shows. */
  events: string[];
  status?: number; body: string; keepAlive?: boolean; error?: UpstreamConnectionError; responseStarted?: boolean;
}

/** A sink that records what it is told; `done` settles on the exchange's completion or failure. */
function recorder(): { sink: ResponseSink; seen: Outcome; done: Promise<Outcome> } {
  const seen: Outcome = { events: [], body: '' };
  let settle!: (o: Outcome) => void;
  const done = new Promise<Outcome>((resolve) => { settle = resolve; });
  const sink: ResponseSink = {
    onHead: (status) => { seen.events.push('head'); seen.status = status; },
    onBody: (chunk) => { seen.events.push('body'); seen.body += chunk.toString('latin1'); },
    onComplete: (_trailers, keepAlive) => { seen.events.push('complete'); seen.keepAlive = keepAlive; settle(seen); },
    onFailure: (err, responseStarted) => { seen.events.push('failure'); seen.error = err; seen.responseStarted = responseStarted; settle(seen); },
  };
  return { sink, seen, done };
}

/** One bodiless exchange on `conn`. */
function exchange(conn: UpstreamConnection, head = GET, connectTimeoutMs = 2000): Promise<Outcome> {
  const r = recorder();
  conn.start(r.sink, head, false, false, connectTimeoutMs);
  return r.done;
}

/** `closed[i]` settles when the i-th accepted connection has closed. */
interface Backend { port: number; sockets: Socket[]; closed: Array<Promise<unknown>> }

/** A TCP server scripted per connection, which it reads; all of it closes when the test ends. */
async function tcpBackend(t: TestContext, onSocket: (s: Socket) => void): Promise<Backend> {
  const sockets: Socket[] = [];
  const closed: Array<Promise<unknown>> = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    closed.push(once(s, 'close'));
    // A client the test closes abruptly resets; that is the test's business, not a crash.
    s.on('error', () => undefined);
    // Always reading: an unread socket never reports the client's FIN.
    s.resume();
    onSocket(s);
  });
  server.listen(0, HOST);
  await once(server, 'listening');
  t.after(async () => { for (const s of sockets) s.destroy(); server.close(); await once(server, 'close'); });
  return { port: (server.address() as AddressInfo).port, sockets, closed };
}

/** A node http server, closed with its connections when the test ends. */
async function httpBackend(t: TestContext, handler: http.RequestListener): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server = http.createServer(handler);
  server.on('connection', () => { connections++; });
  server.listen(0, HOST);
  await once(server, 'listening');
  t.after(async () => { server.closeAllConnections(); server.close(); await once(server, 'close'); });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

/** Calls `onRequest` with each whole request (head, and a Content-Length body) a connection carries. */
function eachRequest(s: Socket, onRequest: (raw: string) => void): void {
  let buf = '';
  s.setEncoding('latin1');
  s.on('data', (d: string) => {
    buf += d;
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + length) return;
      const raw = buf.slice(0, end + 4 + length);
      buf = buf.slice(raw.length);
      onRequest(raw);
    }
  });
}

/** A plain TCP dial to `port` that counts how often it was used. */
function countingDial(port: number): Dial & { count: number; sockets: Socket[] } {
  const dial = Object.assign(() => {
    dial.count++;
    const socket = net.connect(port, HOST);
    dial.sockets.push(socket);
    return { socket, ready: 'connect' as const };
  }, { count: 0, sockets: [] as Socket[] });
  return dial;
}

/** A socket connected to `port`, as a proxy's tunnel hands it over. */
async function connected(port: number): Promise<Socket> {
  const socket = net.connect(port, HOST);
  await once(socket, 'connect');
  return socket;
}

function pool(t: TestContext, o: { idleMs?: number; ioTimeoutMs?: number } = {}): UpstreamPool {
  const p = new UpstreamPool({ idleMs: o.idleMs ?? 5000, ioTimeoutMs: o.ioTimeoutMs });
  t.after(() => p.closeAll());
  return p;
}

test('sequential exchanges on one key share one keep-alive connection', async (t) => {
  const backend = await httpBackend(t, (_req, res) => res.end('ok'));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  assert.equal(first.reused, false);
  const a = await exchange(first);
  assert.deepEqual([a.status, a.body, a.keepAlive], [200, 'ok', true]);
  assert.equal(p.idleCount, 1);

  const second = p.acquire('k', dial);
  assert.equal(second, first);
  assert.equal(second.reused, true);
  assert.equal(p.idleCount, 0, 'a handed-out connection is not idle');
  const b = await exchange(second);
  assert.deepEqual(b.events, ['head', 'body', 'complete']);
  assert.deepEqual([dial.count, backend.connections()], [1, 1], 'one dial, one connection');
});

test('a response with Connection: close is not pooled; the next exchange dials anew', async (t) => {
  // The backend leaves its side open: the client must close it on the header alone.
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok')));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  const a = await exchange(first);
  assert.deepEqual([a.status, a.keepAlive], [200, false]);
  assert.deepEqual([p.idleCount, first.isDestroyed], [0, true]);
  await backend.closed[0];

  const second = p.acquire('k', dial);
  assert.notEqual(second, first);
  assert.equal((await exchange(second)).status, 200);
  assert.equal(dial.count, 2);
});

// A proxy's tunnel ('now') and a TCP connect made late ('connect'): writes made before the socket
// exists wait in order.
const asyncDials: Array<[string, (port: number) => Dial]> = [
  ['a dial resolving after 30 ms with a connecting socket', (port) => () => sleep(30).then((): DialedSocket => ({ socket: net.connect(port, HOST), ready: 'connect' }))],
  ['a dial resolving with a connected socket', (port) => async () => ({ socket: await connected(port), ready: 'now' })],
];
for (const [name, makeDial] of asyncDials) {
  test(`${name}: head and early body arrive in order, onceConnected fires`, async (t) => {
    const received: string[] = [];
    const backend = await tcpBackend(t, (s) => eachRequest(s, (raw) => { received.push(raw); s.write(OK); }));
    const p = pool(t);
    const conn = p.acquire('k', makeDial(backend.port));
    const r = recorder();
    let connectedCalls = 0;
    conn.onceConnected(() => { connectedCalls++; });
    conn.start(r.sink, requestHead('POST', '/upload', ['Host', 'backend', 'Content-Length', '11']), false, true, 2000);
    conn.writeBody('hello ');
    conn.writeBody(Buffer.from('world'));
    conn.endBody();
    assert.equal(conn.isConnected, false, 'the socket does not exist yet');
    const out = await r.done;
    assert.deepEqual(received, ['POST /upload HTTP/1.1\r\nHost: backend\r\nContent-Length: 11\r\n\r\nhello world']);
    assert.deepEqual([out.status, out.body, out.events.at(-1)], [200, 'ok', 'complete']);
    assert.equal(connectedCalls, 1);
    let late = 0;
    conn.onceConnected(() => { late++; });
    assert.equal(late, 1, 'a connected connection runs the callback at once');
    assert.equal(p.idleCount, 1);
  });
}

test('a dial that rejects, or throws, fails the exchange with its own error', async (t) => {
  const p = pool(t);
  const refused = Object.assign(new Error('the proxy refused'), { code: 'EPROXYREFUSED' });
  for (const dial of [() => Promise.reject(refused), () => { throw refused; }] as Dial[]) {
    const conn = p.acquire('k', dial);
    let ranConnected = false;
    conn.onceConnected(() => { ranConnected = true; });
    const out = await exchange(conn);
    assert.equal(out.error, refused);
    assert.deepEqual([out.events, out.responseStarted], [['failure'], false]);
    assert.deepEqual([ranConnected, conn.isDestroyed, p.idleCount], [false, true, 0]);
  }
});

test('a refused TCP connect fails with ECONNREFUSED', async (t) => {
  // A port just freed: nothing listens there.
  const server = net.createServer().listen(0, HOST);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  const out = await exchange(pool(t).acquire('k', countingDial(port)));
  assert.deepEqual([out.error?.code, out.responseStarted], ['ECONNREFUSED', false]);
});

function assertTimeout(out: Outcome, timeout: 'connect' | 'io', timeoutMs: number): void {
  const { events, error, responseStarted } = out;
  assert.deepEqual([events, error?.code, error?.timeout, error?.timeoutMs, responseStarted], [['failure'], 'ETIMEDOUT', timeout, timeoutMs, false]);
}

test('a TLS handshake the server never answers fails as a connect timeout', async (t) => {
  const backend = await tcpBackend(t, () => { /* takes the ClientHello and says nothing */ });
  const dial: Dial = () => ({ socket: tls.connect({ host: HOST, port: backend.port, rejectUnauthorized: false }), ready: 'secureConnect' });
  const conn = pool(t).acquire('k', dial);
  const startedAt = Date.now();
  assertTimeout(await exchange(conn, GET, 150), 'connect', 150);
  assert.ok(Date.now() - startedAt >= 140, 'not before the limit');
  await backend.closed[0];
});

test('a dial that never settles fails as a connect timeout', async (t) => {
  const conn = pool(t).acquire('k', () => new Promise<DialedSocket>(() => undefined));
  assertTimeout(await exchange(conn, GET, 100), 'connect', 100);
  assert.equal(conn.isDestroyed, true);
});

test('a tunnel a dial finishes after the connect timeout is closed, not used', async (t) => {
  let accepted!: () => void;
  const backend = await tcpBackend(t, () => accepted());
  const acceptedNow = new Promise<void>((resolve) => { accepted = resolve; });
  const tunnel = sleep(150).then(async (): Promise<DialedSocket> => ({ socket: await connected(backend.port), ready: 'now' }));
  const conn = pool(t).acquire('k', () => tunnel);
  assertTimeout(await exchange(conn, GET, 50), 'connect', 50);
  assert.equal((await tunnel).socket.destroyed, true);
  await acceptedNow;
  await backend.closed[0];
});

test('with ioTimeoutMs, an upstream that takes the request and never answers fails as an io timeout', async (t) => {
  const backend = await tcpBackend(t, () => undefined);
  assertTimeout(await exchange(pool(t, { ioTimeoutMs: 200 }).acquire('k', countingDial(backend.port))), 'io', 200);
  await backend.closed[0];
});

test('with ioTimeoutMs, an answer that stalls midway fails with responseStarted', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\npart')));
  const out = await exchange(pool(t, { ioTimeoutMs: 200 }).acquire('k', countingDial(backend.port)));
  assert.deepEqual([out.events, out.error?.timeout, out.responseStarted], [['head', 'body', 'failure'], 'io', true]);
});

test('without ioTimeoutMs a silent upstream is waited on', async (t) => {
  const backend = await tcpBackend(t, () => undefined);
  const conn = pool(t).acquire('k', countingDial(backend.port));
  const r = recorder();
  conn.start(r.sink, GET, false, false, 2000);
  assert.equal(await Promise.race([r.done.then(() => 'settled'), sleep(400).then(() => 'waiting')]), 'waiting');
  conn.destroy();
  await backend.closed[0];
  assert.deepEqual(r.seen.events, [], 'an abandoned exchange tells its sink nothing');
});

test('writeChunk and the last chunk make a chunked body node reads whole', async (t) => {
  let seen: { te?: string; body: string } | undefined;
  const backend = await httpBackend(t, (req, res) => {
    let body = '';
    req.setEncoding('latin1');
    req.on('data', (d: string) => { body += d; });
    req.on('end', () => { seen = { te: req.headers['transfer-encoding'], body }; res.end('ok'); });
  });
  const p = pool(t);
  const conn = p.acquire('k', countingDial(backend.port));
  const r = recorder();
  conn.start(r.sink, requestHead('POST', '/', ['Host', 'backend', 'Transfer-Encoding', 'chunked']), false, true, 2000);
  conn.onceConnected(() => {
    conn.writeChunk(Buffer.from('hello '));
    conn.writeChunk(Buffer.from('chunked '.repeat(100)));
    conn.writeChunk(Buffer.from('world'));
    conn.writeBody('0\r\n\r\n');
    conn.endBody();
  });
  const out = await r.done;
  assert.deepEqual([out.status, out.body], [200, 'ok']);
  assert.deepEqual(seen, { te: 'chunked', body: `hello ${'chunked '.repeat(100)}world` });
  assert.equal(p.idleCount, 1, 'a whole chunked body leaves the connection reusable');
});

test('an idle connection closes after idleMs and leaves the pool', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t, { idleMs: 100 });
  await exchange(p.acquire('k', countingDial(backend.port)));
  assert.equal(p.idleCount, 1);
  const idleSince = Date.now();
  await backend.closed[0];
  assert.ok(Date.now() - idleSince >= 80, 'not before idleMs');
  assert.equal(p.idleCount, 0);
});

test('one timer for two limits: an exchange outlasts a shorter idleMs, fails at ioTimeoutMs, and its connection then idles out at idleMs', async (t) => {
  // Answers / at once, /slow after 300 ms, /trickle with a byte at 250 ms and the rest 400 ms later, and never /silent.
  const backend = await tcpBackend(t, (s) => eachRequest(s, (raw) => {
    if (raw.startsWith('GET / ')) s.write(OK);
    if (raw.startsWith('GET /slow')) setTimeout(() => s.write(OK), 300);
    if (raw.startsWith('GET /trickle')) {
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no'), 250);
      setTimeout(() => s.write('k'), 650);
    }
  }));
  const p = pool(t, { idleMs: 100, ioTimeoutMs: 500 });
  const dial = countingDial(backend.port);
  const slow = await exchange(p.acquire('k', dial), requestHead('GET', '/slow', ['Host', 'backend']));
  assert.deepEqual([slow.status, slow.body], [200, 'ok'], 'quiet for 300 ms: past idleMs, within ioTimeoutMs');
  // Quiet for 400 ms after a byte at 250: 650 ms in all, but never 500 ms without a byte.
  const trickle = await exchange(p.acquire('k', dial), requestHead('GET', '/trickle', ['Host', 'backend']));
  assert.deepEqual([trickle.status, trickle.body, dial.count], [200, 'ok', 1], 'the quiet counts from the last byte');
  const t0 = Date.now();
  const silent = await exchange(p.acquire('k', dial), requestHead('GET', '/silent', ['Host', 'backend']));
  assertTimeout(silent, 'io', 500);
  const ms = Date.now() - t0;
  assert.ok(ms >= 450 && ms < 2000, `failed after ${ms} ms`);
  // A new connection, back in the pool after its exchange, closes at idleMs as before.
  await exchange(p.acquire('k', dial));
  assert.equal(p.idleCount, 1);
  const idleSince = Date.now();
  await backend.closed[1];
  const idled = Date.now() - idleSince;
  assert.ok(idled >= 80 && idled < 450, `closed after ${idled} ms idle`);
});

test('dropIdle closes only the matching keys; closeAll closes the rest', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => s.write(OK)));
  const p = pool(t);
  const dial = countingDial(backend.port);
  // One after the other, so the backend's first connection is sandbox-a's.
  await exchange(p.acquire('sandbox-a|80', dial));
  await exchange(p.acquire('sandbox-b|80', dial));
  assert.equal(p.idleCount, 2);

  p.dropIdle((key) => key.startsWith('sandbox-a|'));
  assert.equal(p.idleCount, 1);
  await backend.closed[0];
  assert.equal(backend.sockets[1].destroyed, false, "sandbox-b's connection stays open");

  p.closeAll();
  assert.equal(p.idleCount, 0);
  await backend.closed[1];
  assert.equal(dial.count, 2);
});

test('a pooled connection the backend closed is not handed out again', async (t) => {
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => { s.write(OK); s.end(); }));
  const p = pool(t);
  const dial = countingDial(backend.port);
  const first = p.acquire('k', dial);
  await exchange(first);
  // Right after the FIN: the connection knows it is dead before its socket has emitted 'close'.
  if (!dial.sockets[0].readableEnded) await once(dial.sockets[0], 'end');
  assert.equal(first.isDestroyed, true);
  const second = p.acquire('k', dial);
  assert.notEqual(second, first);
  assert.deepEqual([second.reused, (await exchange(second)).status], [false, 200]);
  assert.equal(dial.count, 2);
});

test('a pooled connection that dies under the next request fails it as retryable', async (t) => {
  // The race the previous test avoids: the backend closes as the reused request arrives.
  let requests = 0;
  const backend = await tcpBackend(t, (s) => eachRequest(s, () => { if (++requests === 1) s.write(OK); else s.destroy(); }));
  const p = pool(t);
  const conn = p.acquire('k', countingDial(backend.port));
  await exchange(conn);
  assert.equal(p.acquire('k', countingDial(backend.port)), conn);
  const out = await exchange(conn);
  assert.deepEqual(out.events, ['failure']);
  assert.ok(['ECONNRESET', 'EPIPE'].includes(out.error?.code ?? ''), `code ${out.error?.code}`);
  assert.deepEqual([out.responseStarted, conn.reused, p.idleCount], [false, true, 0], 'a stale reused socket: the caller may retry');
});

test('an answer before the whole body was sent leaves the connection out of the pool', async (t) => {
  // The backend offers keep-alive, but the rest of the body would be read as its next request.
  const backend = await tcpBackend(t, (s) => {
    s.once('data', () => s.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 8\r\n\r\ntoo big!'));
  });
  const p = pool(t);
  const dial = countingDial(backend.port);
  const conn = p.acquire('k', dial);
  const r = recorder();
  conn.start(r.sink, requestHead('PUT', '/big', ['Host', 'backend', 'Content-Length', '100000']), false, true, 2000);
  conn.onceConnected(() => conn.writeBody(Buffer.alloc(1000, 'x')));
  const out = await r.done;
  assert.deepEqual([out.status, out.body, out.events.at(-1)], [413, 'too big!', 'complete']);
  conn.writeBody(Buffer.alloc(1000, 'x'));
  conn.endBody();
  assert.deepEqual([p.idleCount, conn.isDestroyed], [0, true]);
  await backend.closed[0];
  assert.notEqual(p.acquire('k', dial), conn);
});

test('requestHead writes the request line and headers in order, as latin1 text', () => {
  const head = requestHead('GET', '/p?q=1', ['Host', 'api.example.test', 'X-Name', 'caf\u00e9', 'Accept', '*/*']);
  assert.equal(head, 'GET /p?q=1 HTTP/1.1\r\nHost: api.example.test\r\nX-Name: caf\u00e9\r\nAccept: */*\r\n\r\n');
  assert.ok(Buffer.from(head, 'latin1').includes(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0d])), 'one byte per character');
  assert.equal(requestHead('OPTIONS', '*', []), 'OPTIONS * HTTP/1.1\r\n\r\n');
});

test('requestHead refuses CR, LF and NUL in a header or the target', () => {
  const bad: Array<[string, string[]]> = [['/', ['X-Secret', 'token\r\nX-Injected: 1']], ['/', ['X-Secret', 'tok\nen']],
    ['/', ['X-Secret', 'tok\0en']], ['/', ['X-Bad\r\nName', 'v']], ['/a\r\nHost: evil', ['Host', 'backend']]];
  const invalid = (err: unknown) => err instanceof InvalidHeaderError && err.code === 'ERR_INVALID_CHAR';
  for (const [target, headers] of bad) {
    assert.throws(() => requestHead('GET', target, headers), invalid, JSON.stringify([target, headers]));
  }
  assert.throws(() => requestHead('GET', '/', ['Host', 'b', 'X-Secret', 'a\rb']), { header: 'X-Secret' });
});

test('hasContentLength finds the header whatever its case, among names only', () => {
  for (const name of ['content-length', 'Content-Length', 'CONTENT-LENGTH', 'cOnTeNt-LeNgTh']) {
    assert.equal(hasContentLength(['Host', 'b', name, '0']), true, name);
  }
  assert.equal(hasContentLength(['Content-Lengths', '3', 'X-Content-Length', '3']), false);
  assert.equal(hasContentLength(['X-Header', 'content-length']), false, 'a value is not a name');
  assert.equal(hasContentLength([]), false);
});
