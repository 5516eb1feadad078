/**
 * The data-plane proxy's connections: one client and one backend connection kept alive for many
 * requests, a pooled backend connection dropped under a request retried on a fresh one, a new
 * connection after Connection: close, trailers relayed, and no connection reused after a GET
 * (HEAD, OPTIONS, DELETE) that carried a body.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { call, sandboxHost } from './testing/client.ts';
import { closeDataPlane, startDataPlane, type DataPlane } from './testing/data-plane-fixture.ts';
import { Upstream, type Platform } from './testing/harness.ts';

let plane: DataPlane;
let p: Platform;

before(async () => { ({ p } = plane = await startDataPlane()); });
after(() => closeDataPlane(plane));

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

/**
 * A raw backend that reads a body only where its method defines one (POST, PUT, PATCH), as many
 * servers do: a GET's body stays in its buffer and starts the next request on the connection.
 * Answers each request with its request line, after a moment; records the request lines and connections.
 */
async function bodyIgnoringBackend() {
  let connections = 0;
  const lines: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((sock: Socket) => {
    connections++;
    sockets.add(sock);
    let buf = '';
    sock.on('data', (d) => {
      buf += d.toString('latin1');
      for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
        const head = buf.slice(0, end);
        const line = head.slice(0, head.indexOf('\r\n'));
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        const skip = /^(POST|PUT|PATCH) /.test(line) && length ? Number(length[1]) : 0;
        if (buf.length < end + 4 + skip) return;
        buf = buf.slice(end + 4 + skip);
        lines.push(line);
        // A moment's work first: a body the proxy still had to send would close the connection anyway.
        setTimeout(() => sock.write(`HTTP/1.1 200 OK\r\nContent-Length: ${line.length}\r\n\r\n${line}`), 30);
      }
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = () => { for (const sock of sockets) sock.destroy(); server.close(); };
  return { close, port: (server.address() as { port: number }).port, connections: () => connections, lines };
}

test('a GET, HEAD, OPTIONS or DELETE that carried a body gives its backend connection up: the body cannot start the next client\'s request', async () => {
  const b = await bodyIgnoringBackend();
  p.master.add({ sandboxId: 'lax', envdPort: b.port });
  const h = { 'E2b-Sandbox-Id': 'lax' };
  try {
    // A body that the backend will read as the start of the request after it.
    const smuggled = 'GET /smuggled HTTP/1.1\r\nX-Swallow: ';
    for (const method of ['GET', 'OPTIONS', 'DELETE']) {
      const attack = await call(p.proxy.httpUrl, { method, path: '/attacker', headers: { ...h, 'content-length': String(smuggled.length) }, body: smuggled });
      assert.equal(attack.body, `${method} /attacker HTTP/1.1`);
      const victim = await call(p.proxy.httpUrl, { path: '/victim', headers: h });
      assert.equal(victim.body, 'GET /victim HTTP/1.1', `after a ${method} with a body, the next client's request arrives as sent`);
    }
    assert.deepEqual(b.lines.filter((l) => l.includes('smuggled')), []);
    // A POST's body is read by its backend: its connection is kept as before.
    const before = b.connections();
    assert.equal((await call(p.proxy.httpUrl, { method: 'POST', path: '/form', headers: h, body: 'a=1' })).status, 200);
    assert.equal((await call(p.proxy.httpUrl, { path: '/after', headers: h })).body, 'GET /after HTTP/1.1');
    assert.equal(b.connections(), before, 'a POST with a body leaves its connection pooled');
  } finally {
    b.close();
  }
});
