import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

/**
 * Raw clients through the data-plane proxy: hostile or broken requests are refused before any
 * byte reaches a sandbox; unusual but valid ones (pipelining, HTTP/1.0, 100-continue, trailers) work.
 */

interface Res { status: number; headers: Record<string, string>; body: string }

/** Whole responses in what a connection received (every answer here has a Content-Length, or is 1xx). */
function parseResponses(text: string): { all: Res[]; rest: string } {
  const all: Res[] = [];
  let pos = 0;
  for (;;) {
    const end = text.indexOf('\r\n\r\n', pos);
    if (end < 0) break;
    const lines = text.slice(pos, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const n = Number(headers['content-length'] ?? 0);
    if (text.length < end + 4 + n) break;
    all.push({ status: Number(lines[0].split(' ')[1]), headers, body: text.slice(end + 4, end + 4 + n) });
    pos = end + 4 + n;
  }
  return { all, rest: text.slice(pos) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const sockets = new Set<Socket>();
class Client {
  readonly sock: Socket;
  data = '';
  ended = false;
  constructor(port: number) {
    this.sock = connect(port, '127.0.0.1');
    sockets.add(this.sock);
    this.sock.on('data', (d: Buffer) => { this.data += d.toString('latin1'); });
    this.sock.on('end', () => { this.ended = true; });
    this.sock.on('close', () => { this.ended = true; });
    this.sock.on('error', () => { /* a reset shows as close; the test asserts on what was received */ });
  }
  send(bytes: string | Buffer): void { this.sock.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes); }
  async responses(n: number): Promise<Res[]> {
    const finals = () => parseResponses(this.data).all.filter((r) => r.status >= 200);
    await until(() => finals().length >= n, `${n} responses (got ${JSON.stringify(this.data.slice(0, 300))})`);
    return finals();
  }
}

let p: Platform;
let up: Upstream;
let port: number;
let H: string;
/** What the sandbox received, body bytes and trailers included. */
const received: Array<{ method: string; url: string; body: Buffer; trailers: Record<string, string>; expect: string | undefined }> = [];

before(async () => {
  p = await startPlatform({ lifecycleReplicas: 1 });
  up = new Upstream('rec');
  up.custom = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ method: req.method!, url: req.url!, body, trailers: req.trailers as Record<string, string>, expect: req.headers.expect });
      const out = JSON.stringify({ url: req.url, bytes: body.length, sha: createHash('sha256').update(body).digest('hex') });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(out);
    });
    return true;
  };
  await up.listen();
  p.master.add({ sandboxId: 'sbxa', envdPort: up.port });
  port = Number(new URL(p.proxy.httpUrl).port);
  H = `Host: ${sandboxHost(up.port, 'sbxa')}\r\n`;
});

after(async () => {
  for (const s of sockets) s.destroy();
  await p.close();
  await up.close();
});

/** Sends `raw` and checks the proxy's JSON refusal, the connection's end, and that the sandbox saw nothing. */
async function refused(proxyPort: number, raw: string, status: number): Promise<{ code: number; message: string }> {
  const seen = up.requests.length;
  const c = new Client(proxyPort);
  c.send(raw);
  await until(() => c.ended, 'the connection to end');
  const { all, rest } = parseResponses(c.data);
  assert.equal(all.length, 1, c.data);
  assert.equal(rest, '');
  assert.equal(all[0].status, status);
  assert.equal(all[0].headers['content-type'], 'application/json');
  assert.equal(all[0].headers.connection, 'close');
  const body = JSON.parse(all[0].body) as { code: number; message: string };
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message']);
  assert.equal(body.code, status);
  assert.ok(body.message.length > 0);
  await sleep(50); // a request forwarded after all would have reached the sandbox by now
  assert.equal(up.requests.length, seen, 'the sandbox saw nothing');
  return body;
}

test('Content-Length with Transfer-Encoding (the CL.TE smuggling shape) is refused 400', async () => {
  const r = await refused(port, `POST / HTTP/1.1\r\n${H}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG`, 400);
  assert.match(r.message, /Transfer-Encoding and Content-Length/);
});

test('Transfer-Encoding before Content-Length (the TE.CL smuggling shape) is refused 400', async () => {
  const smuggled = `GET /admin HTTP/1.1\r\n${H}\r\n`;
  const chunk = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
  await refused(port, `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n${chunk}`, 400);
});

test('Transfer-Encoding gzip is refused 400, and "gzip, chunked" too', async () => {
  await refused(port, `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\nabc`, 400);
  await refused(port, `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`, 400);
});

test('two different Content-Lengths are refused 400', async () => {
  await refused(port, `POST / HTTP/1.1\r\n${H}Content-Length: 3\r\nContent-Length: 5\r\n\r\nabcde`, 400);
});

test('an obs-folded header line is refused 400', async () => {
  await refused(port, `GET / HTTP/1.1\r\n${H}X-Folded: first\r\n second\r\n\r\n`, 400);
});

test('a head with LF-only line endings is refused 400', async () => {
  await refused(port, `GET / HTTP/1.1\n${H.replace('\r\n', '\n')}\n`, 400);
});

test('a head over 16 KiB is refused 431', async () => {
  await refused(port, `GET / HTTP/1.1\r\n${H}X-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`, 431);
});

test('an HTTP/2.0 request line is refused 400 (a client\'s mistake, not a server error)', async () => {
  await refused(port, `GET / HTTP/2.0\r\n${H}\r\n`, 400);
});

test('CONNECT is refused 405', async () => {
  await refused(port, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n${H}\r\n`, 405);
});

test('an HTTP/1.1 request without Host is refused 400, even when the e2b headers name a sandbox', async () => {
  const r = await refused(port, `GET / HTTP/1.1\r\nE2b-Sandbox-Id: sbxa\r\nE2b-Sandbox-Port: ${up.port}\r\n\r\n`, 400);
  assert.match(r.message, /Host/);
});

test('a head that never completes is answered 408 after clientHeadersTimeoutMs', async () => {
  const slow = await startPlatform({ lifecycleReplicas: 1, tuning: { clientHeadersTimeoutMs: 200 } });
  try {
    slow.master.add({ sandboxId: 'sbxa', envdPort: up.port });
    const t0 = Date.now();
    await refused(Number(new URL(slow.proxy.httpUrl).port), `GET /slow HTTP/1.1\r\n${H}X-Partial: yes\r\n`, 408);
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 190 && elapsed < 2000, `answered after ${elapsed} ms`);
  } finally {
    for (const s of sockets) s.destroy();
    await slow.close();
  }
});

test('Connection listing Content-Length or Transfer-Encoding does not strip the framing: the body stays the body, never a second request', async () => {
  const smuggled = `GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n`;
  const before = received.length;
  const c = new Client(port);
  c.send(`POST /outer HTTP/1.1\r\n${H}Connection: content-length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`);
  const chunked = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
  c.send(`POST /outer2 HTTP/1.1\r\n${H}Connection: transfer-encoding, host\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}`);
  const rs = await c.responses(2);
  assert.deepEqual(rs.map((r) => [r.status, JSON.parse(r.body).url, JSON.parse(r.body).bytes]), [[200, '/outer', smuggled.length], [200, '/outer2', smuggled.length]]);
  await sleep(50);
  assert.deepEqual(received.slice(before).map((r) => [r.url, r.body.toString('latin1')]), [['/outer', smuggled], ['/outer2', smuggled]], 'the sandbox saw two requests, each with its body, and no /smuggled');
});

test('a Connection header listing more than 64 header names is refused 400', async () => {
  const names = Array.from({ length: 65 }, (_, i) => `x-h${i}`).join(', ');
  const seen = up.requests.length;
  const c = new Client(port);
  c.send(`GET / HTTP/1.1\r\n${H}Connection: ${names}\r\n\r\n`);
  const [r] = await c.responses(1);
  assert.equal(r.status, 400);
  assert.equal(r.headers['content-type'], 'application/json');
  assert.match(JSON.parse(r.body).message, /Connection/);
  assert.equal(up.requests.length, seen, 'the sandbox saw nothing');
});

test('three GETs pipelined in one write are answered in order, each with its own body', async () => {
  const c = new Client(port);
  c.send(['/p1', '/p2', '/p3'].map((u) => `GET ${u} HTTP/1.1\r\n${H}\r\n`).join(''));
  const rs = await c.responses(3);
  assert.deepEqual(rs.map((r) => [r.status, JSON.parse(r.body).url]), [[200, '/p1'], [200, '/p2'], [200, '/p3']]);
  assert.equal(parseResponses(c.data).rest, '');
  assert.equal(c.ended, false);
});

test('an HTTP/1.0 client gets its answer and then the connection closes', async () => {
  const c = new Client(port);
  c.send(`GET /old HTTP/1.0\r\n${H}\r\n`);
  await until(() => c.ended, 'the connection to end');
  const { all, rest } = parseResponses(c.data);
  assert.equal(all.length, 1);
  assert.equal(rest, '');
  assert.equal(all[0].status, 200);
  assert.equal(all[0].headers.connection, 'close');
  assert.equal(JSON.parse(all[0].body).url, '/old');
});

test('an upload with Expect: 100-continue sees 100 Continue, then the sandbox\'s answer with the whole body', async () => {
  const body = randomBytes(64 * 1024);
  const c = new Client(port);
  c.send(`POST /continue HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`);
  await until(() => c.data.length > 0, 'the interim answer');
  assert.equal(c.data, 'HTTP/1.1 100 Continue\r\n\r\n');
  c.send(body);
  const [r] = await c.responses(1);
  assert.equal(r.status, 200);
  assert.deepEqual(JSON.parse(r.body), { url: '/continue', bytes: body.length, sha: createHash('sha256').update(body).digest('hex') });
  assert.equal(received.at(-1)?.expect, undefined, 'the proxy answered the Expect itself');
  assert.equal(c.data.split('100 Continue').length, 2, 'one interim answer');
});

test('a chunked upload with a trailer reaches the sandbox with its bytes and trailer intact', async () => {
  const parts = [randomBytes(10), randomBytes(1000), randomBytes(70_000)];
  const whole = Buffer.concat(parts);
  const sum = createHash('sha256').update(whole).digest('hex');
  const c = new Client(port);
  c.send(`POST /chunked HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n`);
  for (const part of parts) c.send(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')]));
  c.send(`0\r\nX-Checksum: ${sum}\r\n\r\n`);
  const [r] = await c.responses(1);
  assert.equal(r.status, 200);
  const got = received.find((x) => x.url === '/chunked');
  assert.ok(got);
  assert.ok(got.body.equals(whole), 'body bytes equal');
  assert.deepEqual(got.trailers, { 'x-checksum': sum });
});
