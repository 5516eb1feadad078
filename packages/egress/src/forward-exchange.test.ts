import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import tls from 'node:tls';
import { silentLogger } from '@svc/common';
import type { EgressRule } from '@svc/contracts/egress';
import { EgressCa } from './certificates.ts';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';
import { eventually, listen } from './tunnel-test-support.ts';
import { readAuditRecords } from './testing/audit-file.ts';

// Forwarding on the lean HTTP/1.1 path (forward-exchange.ts, @svc/http1) through the real egress
// proxy, all on loopback: the sandbox is 127.0.0.1, every upstream listens on 127.0.0.1 under the
// names below (the proxy's `resolve` overrides), on a port of its own, so that no two tests share
// a pool key.

type Scheme = 'http' | 'https';
const SCHEMES: Scheme[] = ['http', 'https'];
const HOST = 'up.fwd.test';
const EVIL = 'evil.fwd.test';
const EVIL_SECRET = 'abc\r\nX-Evil: 1';

let dir: string;
let upstreamCa: EgressCa;
let proxy: EgressProxy;
let rules: EgressRule[] = [];
let opened: Upstream[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'egress-forward-'));
  upstreamCa = await EgressCa.loadOrCreate(join(dir, 'upstream-ca'));
  proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'), auditLogPath: join(dir, 'access.jsonl'),
    resolve: { [HOST]: '127.0.0.1', [EVIL]: '127.0.0.1' }, upstreamCa: upstreamCa.caPem, logger: silentLogger(),
  });
});

afterEach(() => {
  for (const up of opened) up.close();
  opened = [];
  rules = [];
});

after(async () => {
  await proxy?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Upstream {
  port: number;
  /** TCP connections accepted. */
  connections: number;
  /** Requests handed to the handler (node's servers only). */
  requests: number;
  close(): void;
}

const tlsOptions = (): tls.TlsOptions => {
  const leaf = upstreamCa.leafFor(HOST);
  return {
    cert: leaf.cert, key: leaf.key,
    SNICallback: (name, cb) => { const l = upstreamCa.leafFor(name); cb(null, tls.createSecureContext({ cert: l.cert, key: l.key })); },
  };
};

function putPolicy(): void {
  proxy.store.put({ sandboxId: 'sbx-forward', address: '127.0.0.1', rules });
}

/** Listens, and allows the sandbox to reach the server as HOST on its port. */
async function serve(scheme: Scheme, server: net.Server, up: Upstream): Promise<Upstream> {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    up.connections++;
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  up.close = () => { server.close(); for (const s of sockets) s.destroy(); };
  opened.push(up);
  up.port = await listen(server);
  rules.push({ name: `${scheme}-${up.port}`, match: { scheme, port: up.port, host: HOST }, action: { allow: true } });
  putPolicy();
  return up;
}

/** An upstream made with node's own server. */
function nodeUpstream(scheme: Scheme, handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Upstream> {
  const up: Upstream = { port: 0, connections: 0, requests: 0, close: () => undefined };
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => { up.requests++; handler(req, res); };
  return serve(scheme, scheme === 'https' ? https.createServer(tlsOptions(), onRequest) : http.createServer(onRequest), up);
}

/** An upstream that speaks on the socket itself (decrypted for https), for answers node's server will not give. */
function rawUpstream(scheme: Scheme, onSocket: (s: net.Socket) => void): Promise<Upstream> {
  const up: Upstream = { port: 0, connections: 0, requests: 0, close: () => undefined };
  const handler = (s: net.Socket) => { s.on('error', () => { /* the proxy may reset a connection it gave up on */ }); onSocket(s); };
  return serve(scheme, scheme === 'https' ? tls.createServer(tlsOptions(), handler) : net.createServer(handler), up);
}

/** Calls `onHead` with each request head (up to the blank line) and the bytes after it; the requests carry no body. */
function onRequestHeads(s: net.Socket, onHead: (head: string, index: number) => void): void {
  let buf = Buffer.alloc(0);
  let index = 0;
  s.on('data', (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    for (let end = buf.indexOf('\r\n\r\n'); end >= 0; end = buf.indexOf('\r\n\r\n')) {
      const head = buf.subarray(0, end).toString('latin1');
      buf = buf.subarray(end + 4);
      onHead(head, index++);
    }
  });
}

/** A chunked body decoded strictly: undefined while incomplete, an error when badly framed or followed by anything. */
function dechunk(buf: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', pos);
    if (eol < 0) return undefined;
    const sizeText = buf.toString('latin1', pos, eol);
    if (!/^[0-9a-f]+$/i.test(sizeText)) throw new Error(`bad chunk size line ${JSON.stringify(sizeText)}`);
    const size = parseInt(sizeText, 16);
    pos = eol + 2;
    if (buf.length < pos + size + 2) return undefined;
    if (size === 0) {
      if (buf.toString('latin1', pos) !== '\r\n') throw new Error(`bytes after the last chunk: ${JSON.stringify(buf.toString('latin1', pos))}`);
      return Buffer.concat(parts);
    }
    parts.push(buf.subarray(pos, pos + size));
    if (buf.toString('latin1', pos + size, pos + size + 2) !== '\r\n') throw new Error('a chunk not followed by CRLF');
    pos += size + 2;
  }
}

interface Call {
  scheme: Scheme;
  port: number;
  host?: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  agent?: http.Agent;
  /** Writes the body; absent: none. */
  body?: (req: http.ClientRequest) => void | Promise<void>;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  trailers: NodeJS.Dict<string>;
}

/** A request from the sandbox, through the proxy's listener of its scheme. */
function call(c: Call, onResponse?: (res: http.IncomingMessage) => void): Promise<Answer> {
  const host = c.host ?? HOST;
  const options: https.RequestOptions = {
    host: '127.0.0.1', port: c.scheme === 'https' ? proxy.httpsPort : proxy.httpPort,
    method: c.method ?? 'GET', path: c.path ?? '/', agent: c.agent ?? false,
    headers: { host: `${host}:${c.port}`, ...c.headers },
    ...(c.scheme === 'https' ? { ca: proxy.caPem, servername: host } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (c.scheme === 'https' ? https : http).request(options, (res) => {
      onResponse?.(res);
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString(), trailers: res.trailers }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (!c.body) { req.end(); return; }
    Promise.resolve(c.body(req)).then(() => req.end(), reject);
  });
}

const keepAliveAgent = (scheme: Scheme) => (scheme === 'https' ? new https.Agent({ keepAlive: true, maxSockets: 1 }) : new http.Agent({ keepAlive: true, maxSockets: 1 }));
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function auditRecord(path: string): Promise<Record<string, unknown>> {
  return eventually(async () => (await readAuditRecords(join(dir, 'access.jsonl'))).find((r) => r.path === path && r.type === undefined), `the request record of ${path}`);
}

for (const scheme of SCHEMES) {
  test(`${scheme}: a chunked request body reaches the upstream whole and framed, and is counted`, { timeout: 5_000 }, async () => {
    let received: { head: string; body: Buffer } | undefined;
    const up = await rawUpstream(scheme, (s) => {
      let buf = Buffer.alloc(0);
      s.on('data', (c: Buffer) => {
        buf = Buffer.concat([buf, c]);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0 || received) return;
        const body = dechunk(buf.subarray(end + 4));
        if (!body) return;
        received = { head: buf.subarray(0, end).toString('latin1'), body };
        s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      });
    });
    const parts = ['alpha-', 'x'.repeat(100_000), '-omega'];
    const path = `/chunked-up-${scheme}`;
    const r = await call({ scheme, port: up.port, method: 'POST', path, headers: { 'transfer-encoding': 'chunked' }, body: async (req) => {
      for (const p of parts) { req.write(p); await pause(20); }
    } });
    assert.equal(r.status, 200);
    assert.equal(r.text, 'ok');
    assert.match(received!.head, /\r\nTransfer-Encoding: chunked(\r\n|$)/i);
    assert.doesNotMatch(received!.head, /content-length/i);
    assert.equal(received!.body.toString(), parts.join(''));
    assert.equal((await auditRecord(path)).bytes_in, parts.join('').length);
  });

  test(`${scheme}: a chunked response reaches the sandbox with its trailers, and is counted`, { timeout: 5_000 }, async () => {
    const up = await nodeUpstream(scheme, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', trailer: 'X-Checksum' });
      res.write('first,');
      setTimeout(() => { res.addTrailers({ 'X-Checksum': 'c0ffee' }); res.end('second'); }, 20);
    });
    const path = `/trailers-${scheme}`;
    const r = await call({ scheme, port: up.port, path });
    assert.equal(r.status, 200);
    assert.equal(r.text, 'first,second');
    assert.equal(r.trailers['x-checksum'], 'c0ffee');
    assert.equal((await auditRecord(path)).bytes_out, 'first,second'.length);
  });

  test(`${scheme}: a server-sent event stream is relayed as it comes, not buffered`, { timeout: 5_000 }, async () => {
    let secondSent = false;
    const up = await nodeUpstream(scheme, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write('data: one\n\n');
      setTimeout(() => { secondSent = true; res.end('data: two\n\n'); }, 300);
    });
    let headEarly = false;
    let first: { text: string; early: boolean } | undefined;
    const r = await call({ scheme, port: up.port, path: '/events' }, (res) => {
      headEarly = !secondSent;
      res.once('data', (b: Buffer) => { first = { text: b.toString(), early: !secondSent }; });
    });
    assert.equal(r.headers['content-type'], 'text/event-stream');
    assert.ok(headEarly, 'the head came before the second event was sent');
    assert.deepEqual(first, { text: 'data: one\n\n', early: true });
    assert.equal(r.text, 'data: one\n\ndata: two\n\n');
  });

  test(`${scheme}: HEAD with a Content-Length completes, and its connection serves the next GET`, { timeout: 5_000 }, async () => {
    const up = await nodeUpstream(scheme, (req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1234' });
      res.end(req.method === 'HEAD' ? undefined : 'x'.repeat(1234));
    });
    const agent = keepAliveAgent(scheme);
    try {
      const head = await call({ scheme, port: up.port, method: 'HEAD', path: '/head', agent });
      assert.equal(head.status, 200);
      assert.equal(head.headers['content-length'], '1234');
      assert.equal(head.text, '');
      const get = await call({ scheme, port: up.port, path: '/after-head', agent });
      assert.equal(get.text.length, 1234);
      assert.equal(up.connections, 1);
    } finally {
      agent.destroy();
    }
  });

  test(`${scheme}: keep-alive: 20 requests on one sandbox connection, and 20 on 20 connections, share pooled upstream connections`, { timeout: 5_000 }, async () => {
    const up = await nodeUpstream(scheme, (req, res) => res.end(`seen ${req.url}`));
    const agent = keepAliveAgent(scheme);
    try {
      for (let i = 0; i < 20; i++) assert.equal((await call({ scheme, port: up.port, path: `/one/${i}`, agent })).text, `seen /one/${i}`);
    } finally {
      agent.destroy();
    }
    assert.equal(up.connections, 1, 'one sandbox connection: one upstream connection');
    for (let i = 0; i < 20; i++) assert.equal((await call({ scheme, port: up.port, path: `/many/${i}` })).text, `seen /many/${i}`);
    assert.ok(up.connections <= 2, `20 sandbox connections took ${up.connections} upstream connections`);
    assert.equal(up.requests, 40);
  });

  test(`${scheme}: a pooled connection the upstream dropped is retried once on a new one`, { timeout: 5_000 }, async () => {
    const seen: string[] = [];
    let connection = 0;
    const up = await rawUpstream(scheme, (s) => {
      const n = ++connection;
      onRequestHeads(s, (head, index) => {
        const path = head.split(' ')[1];
        seen.push(`${n}:${path}`);
        // The first connection goes away when its second request arrives: the race of an
        // upstream closing an idle connection just as the proxy reuses it.
        if (n === 1 && index === 1) { s.destroy(); return; }
        s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${path.length}\r\n\r\n${path}`);
      });
    });
    assert.equal((await call({ scheme, port: up.port, path: '/a' })).text, '/a');
    const second = await call({ scheme, port: up.port, path: '/b' });
    assert.equal(second.status, 200);
    assert.equal(second.text, '/b');
    assert.deepEqual(seen, ['1:/a', '1:/b', '2:/b']);
    assert.equal(up.connections, 2);
  });

  test(`${scheme}: a pooled connection the upstream closed while idle is replaced`, { timeout: 5_000 }, async () => {
    const up = await rawUpstream(scheme, (s) => onRequestHeads(s, () => {
      s.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
      setTimeout(() => s.end(), 30);
    }));
    assert.equal((await call({ scheme, port: up.port, path: '/a' })).status, 200);
    await pause(150);
    assert.equal((await call({ scheme, port: up.port, path: '/b' })).status, 200);
    assert.equal(up.connections, 2);
  });

  test(`${scheme}: an inject whose secret holds a line break is never sent: 502 {code, message}, and the proxy goes on`, { timeout: 5_000 }, async () => {
    const up = await nodeUpstream(scheme, (_req, res) => res.end('fine'));
    rules.unshift({ name: 'evil', match: { scheme, port: up.port, host: EVIL }, action: { allow: true, inject: [{ header: 'X-Key', secret: EVIL_SECRET }] } });
    putPolicy();
    const path = `/evil-${scheme}`;
    for (let i = 0; i < 2; i++) {
      const r = await call({ scheme, port: up.port, host: EVIL, path });
      assert.equal(r.status, 502);
      const body = JSON.parse(r.text) as { code: number; message: string };
      assert.deepEqual(Object.keys(body).sort(), ['code', 'message']);
      assert.equal(body.code, 502);
      assert.match(body.message, /evil\.fwd\.test/);
      assert.ok(!r.text.includes('X-Evil') && !r.text.includes('abc'), 'the secret is not shown to the sandbox');
    }
    assert.equal(up.connections, 0, 'the upstream was not even contacted');
    assert.equal((await auditRecord(path)).status, 502);
    assert.equal((await call({ scheme, port: up.port, path: '/after-evil' })).text, 'fine');
    assert.equal(up.requests, 1);
  });

  test(`${scheme}: an invalid status line is a 502 naming the host`, { timeout: 5_000 }, async () => {
    const up = await rawUpstream(scheme, (s) => onRequestHeads(s, () => s.write('HTTP/1.1 abc\r\n\r\n')));
    const r = await call({ scheme, port: up.port, path: '/bad-status' });
    assert.equal(r.status, 502);
    const body = JSON.parse(r.text) as { code: number; message: string };
    assert.equal(body.code, 502);
    assert.match(body.message, /up\.fwd\.test/);
  });

  test(`${scheme}: a 413 the upstream sends before reading a 1 MB upload reaches the sandbox`, { timeout: 5_000 }, async () => {
    const up = await rawUpstream(scheme, (s) => onRequestHeads(s, () => {
      s.pause(); // never reads the upload
      s.write('HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\ntoo large');
    }));
    const upload = Buffer.alloc(1024 * 1024, 1);
    const r = await call({ scheme, port: up.port, method: 'POST', path: '/upload', headers: { 'content-length': String(upload.length) }, body: (req) => { req.write(upload); } });
    assert.equal(r.status, 413);
    assert.equal(r.text, 'too large');
  });

  test(`${scheme}: a sandbox that leaves mid-response closes the upstream connection within 1 s`, { timeout: 5_000 }, async () => {
    let upstreamClosed: number | undefined;
    const up = await nodeUpstream(scheme, (req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('tick\n');
      const timer = setInterval(() => res.write('tick\n'), 100);
      req.socket.once('close', () => { clearInterval(timer); upstreamClosed = Date.now(); });
    });
    const left = await new Promise<number>((resolve, reject) => {
      const req = (scheme === 'https' ? https : http).request({
        host: '127.0.0.1', port: scheme === 'https' ? proxy.httpsPort : proxy.httpPort, path: '/slow', agent: false,
        headers: { host: `${HOST}:${up.port}` }, ...(scheme === 'https' ? { ca: proxy.caPem, servername: HOST } : {}),
      }, (res) => res.once('data', () => { req.destroy(); resolve(Date.now()); }));
      req.on('error', (err) => { if (req.destroyed) return; reject(err); });
      req.end();
    });
    const closedAt = await eventually(() => upstreamClosed, 'the upstream to see its connection close', 2_000);
    assert.ok(closedAt - left < 1_000, `the upstream connection closed ${closedAt - left} ms after the sandbox left`);
  });
}
