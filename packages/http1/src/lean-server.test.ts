import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { LeanServer, type LeanServerOptions } from './lean-server.ts';
import { InvalidHeaderError } from './request-head.ts';
import type { RequestParseError } from './request-parser.ts';
import type { ServerReply } from './server-reply.ts';
import type { ServerRequest } from './server-request.ts';

interface Res { status: number; headers: Record<string, string>; body: string }

/** Splits the bytes a connection received into whole responses; `bodiless`: indexes (among final answers) of answers to HEAD. */
function parseResponses(text: string, ended: boolean, bodiless: number[] = []): { all: Res[]; rest: string } {
  const all: Res[] = [];
  let pos = 0;
  for (let end = text.indexOf('\r\n\r\n'); end >= 0; end = text.indexOf('\r\n\r\n', pos)) {
    const lines = text.slice(pos, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const status = Number(lines[0].split(' ')[1]);
    let p = end + 4;
    let body = '';
    if (status >= 200 && status !== 204 && status !== 304 && !bodiless.includes(all.filter((r) => r.status >= 200).length)) {
      if (headers['content-length'] !== undefined) {
        const n = Number(headers['content-length']);
        if (text.length < p + n) break;
        body = text.slice(p, (p += n));
      } else if (headers['transfer-encoding'] === 'chunked') {
        let size = -1;
        for (let le = text.indexOf('\r\n', p); le >= 0 && size !== 0; le = text.indexOf('\r\n', p)) {
          size = parseInt(text.slice(p, le), 16);
          if (size === 0) { const te = text.indexOf('\r\n\r\n', le); p = te < 0 ? -1 : te + 4; break; }
          if (text.length < le + 4 + size) break;
          body += text.slice(le + 2, le + 2 + size);
          p = le + 4 + size;
        }
        if (size !== 0 || p < 0) break; // the terminating chunk is still to come
      } else {
        if (!ended) break; // delimited by the connection's end
        body = text.slice(p);
        p = text.length;
      }
    }
    all.push({ status, headers, body });
    pos = p;
  }
  return { all, rest: text.slice(pos) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  for (const t0 = Date.now(); !cond(); await sleep(5)) if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
}

const sockets = new Set<Socket>();
/** A raw client: the bytes sent are exactly the test's; everything received is kept as latin1 text. */
class Client {
  readonly sock: Socket;
  data = ''; ended = false; closed = false;
  constructor(port: number) {
    this.sock = connect(port, '127.0.0.1');
    sockets.add(this.sock);
    this.sock.on('data', (d: Buffer) => { this.data += d.toString('latin1'); });
    this.sock.on('end', () => { this.ended = true; });
    this.sock.on('close', () => { this.closed = true; });
    this.sock.on('error', () => { /* a reset shows as close; the test asserts on what was received */ });
  }
  send(bytes: string | Buffer): void { this.sock.write(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes); }
  parsed(bodiless: number[] = []) { return parseResponses(this.data, this.ended, bodiless); }
  /** Waits for `n` final answers (1xx not counted). */
  async responses(n: number, bodiless: number[] = [], ms = 3000): Promise<Res[]> {
    const finals = () => this.parsed(bodiless).all.filter((r) => r.status >= 200);
    await until(() => finals().length >= n, `${n} responses (got ${JSON.stringify(this.data.slice(0, 300))})`, ms);
    return finals();
  }
}

interface Served {
  port: number; lean: LeanServer; server: Server; urls: string[]; clientErrors: RequestParseError[]; internalErrors: unknown[]; headerErrors: unknown[];
  upgrades: Array<{ req: ServerRequest; head: Buffer; later: Buffer[] }>; closes: Array<{ url: string; finished: boolean; aborted: boolean }>;
}
const served: Served[] = [];

function text(reply: ServerReply, status: number, body: string): void {
  reply.writeHead(status, undefined, ['Content-Type', 'text/plain', 'Content-Length', String(Buffer.byteLength(body))]);
  reply.end(body);
}

/** A lean server whose handler echoes each request (method, url, body size, trailers); some paths behave specially. */
async function serve(o: LeanServerOptions = { keepAliveTimeoutMs: 5000, headersTimeoutMs: 5000 }): Promise<Served> {
  const s = { urls: [], clientErrors: [], internalErrors: [], headerErrors: [], upgrades: [], closes: [] } as unknown as Served;
  s.lean = new LeanServer({
    onRequest(req, reply) {
      s.urls.push(req.url);
      reply.onClose(() => s.closes.push({ url: req.url, finished: reply.finished, aborted: req.aborted }));
      const path = req.url;
      if (path === '/throw') throw new Error('handler bug');
      if (path === '/early') { setImmediate(() => text(reply, 200, 'early')); return; }
      if (path === '/hang') { req.read(() => {}, () => {}); return; }
      if (path.startsWith('/late/')) { setTimeout(() => text(reply, 200, 'late'), Number(path.slice(6))); return; }
      if (path === '/trickle') { // a byte at 250 ms, the rest 400 ms later
        setTimeout(() => { reply.writeHead(200, undefined, ['Content-Length', '2']); reply.write('o'); }, 250);
        setTimeout(() => reply.end('k'), 650);
        return;
      }
      if (path === '/204') { reply.writeHead(204, undefined, []); reply.end(); return; }
      if (path === '/nolength') { reply.writeHead(200, undefined, ['Content-Type', 'text/plain']); reply.write('abc'); reply.end('def'); return; }
      if (path.startsWith('/crlf')) { // a CR/LF in a header value, or in the status text
        try {
          if (path === '/crlf') reply.writeHead(200, undefined, ['X-Bad', 'a\r\nInjected: yes']);
          else reply.writeHead(200, 'OK\r\nInjected: yes', []);
          reply.end('unsafe head sent');
        } catch (err) { s.headerErrors.push(err); text(reply, 500, `refused, sent=${String(reply.headersSent)}`); }
        return;
      }
      const hash = createHash('sha256');
      const chunks: Buffer[] = [];
      let [bytes, pauses] = [0, 0];
      req.read((c) => {
        hash.update(c);
        if ((bytes += c.length) < 256) chunks.push(c);
        // /pause stops the body every 500 kB for a while.
        if (path === '/pause' && Math.floor((bytes - c.length) / 500_000) !== Math.floor(bytes / 500_000)) { req.pause(); pauses++; setTimeout(() => req.resume(), 10); }
      }, () => {
        const answer = () => text(reply, 200, JSON.stringify({
          method: req.method, url: req.url, bytes, sha: hash.digest('hex'), pauses, trailers: req.trailers, body: Buffer.concat(chunks).toString('latin1'),
        }));
        if (path.startsWith('/sync')) answer(); else setImmediate(answer);
      });
    },
    onUpgrade(req, socket, head) {
      sockets.add(socket);
      const u = { req, head, later: [] as Buffer[] };
      s.upgrades.push(u);
      socket.on('data', (d: Buffer) => { u.later.push(d); socket.write(`echo:${d.toString('latin1')}`); });
      socket.on('error', () => { /* the test's client went away */ });
      socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
      // Handed over paused: read only later, so that bytes the client sent meanwhile must have waited.
      setTimeout(() => socket.resume(), 50);
    },
    onClientError(err, socket) {
      sockets.add(socket);
      s.clientErrors.push(err);
      socket.end(`HTTP/1.1 ${err.status} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
    },
    onInternalError(err) { s.internalErrors.push(err); },
  }, o);
  s.server = createServer();
  s.lean.attach(s.server, 'connection');
  await new Promise<void>((r) => s.server.listen(0, '127.0.0.1', r));
  s.port = (s.server.address() as AddressInfo).port;
  served.push(s);
  return s;
}

after(async () => {
  for (const sock of sockets) sock.destroy();
  await Promise.all(served.map((s) => { s.lean.closeAll(); return new Promise((r) => s.server.close(r)); }));
});

const main = serve();
const H = 'Host: x\r\n';

test('several requests in turn on one kept-alive connection are each answered, with a Date, the connection staying open', async () => {
  const c = new Client((await main).port);
  const sent = [`GET /one HTTP/1.1\r\n${H}\r\n`, `POST /two HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello`, `GET /three HTTP/1.1\r\n${H}\r\n`];
  for (const [i, raw] of sent.entries()) { c.send(raw); await c.responses(i + 1); }
  const rs = await c.responses(3);
  assert.deepEqual(rs.map((r) => JSON.parse(r.body).url), ['/one', '/two', '/three']);
  assert.equal(JSON.parse(rs[1].body).body, 'hello');
  for (const r of rs) { assert.equal(r.headers.connection, 'keep-alive'); assert.equal(r.headers['keep-alive'], 'timeout=5'); }
  assert.equal(c.ended, false);
  assert.match(rs[0].headers.date, /^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/);
  assert.ok(Math.abs(Date.parse(rs[0].headers.date) - Date.now()) < 5000);
});

test('two requests pipelined in one write are answered in order', async () => {
  const c = new Client((await main).port);
  c.send(`POST /a HTTP/1.1\r\n${H}Content-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.deepEqual(rs.map((r) => [JSON.parse(r.body).url, JSON.parse(r.body).body]), [['/a', 'abc'], ['/b', '']]);
});

test('pipelined requests are answered when the handler replies synchronously at the body\'s end', async () => {
  const c = new Client((await main).port);
  c.send(`GET /sync/a HTTP/1.1\r\n${H}\r\nGET /sync/b HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.deepEqual(rs.map((r) => JSON.parse(r.body).url), ['/sync/a', '/sync/b']);
});

test('HTTP/1.0 without keep-alive is answered with Connection: close and the connection ends; with keep-alive it stays open', async () => {
  const c = new Client((await main).port);
  c.send('GET /ten HTTP/1.0\r\n\r\n');
  await until(() => c.ended, 'the connection to end');
  const { all: [r], rest } = c.parsed();
  assert.deepEqual([r.headers.connection, JSON.parse(r.body).url, rest], ['close', '/ten', '']);
  const ka = new Client((await main).port);
  for (const i of [1, 2]) { ka.send(`GET /k${i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`); await ka.responses(i); }
  assert.deepEqual((await ka.responses(2)).map((x) => [x.headers.connection, JSON.parse(x.body).url]), [['keep-alive', '/k1'], ['keep-alive', '/k2']]);
  assert.equal(ka.ended, false);
});

test('a length-less answer ends with the connection for HTTP/1.0, and is chunked for HTTP/1.1, which keeps it', async () => {
  const c10 = new Client((await main).port);
  c10.send('GET /nolength HTTP/1.0\r\n\r\n');
  await until(() => c10.ended, 'the connection to end');
  const { all: [r10], rest } = c10.parsed();
  assert.deepEqual([r10.headers['transfer-encoding'], r10.headers['content-length'], r10.headers.connection], [undefined, undefined, 'close']);
  assert.deepEqual([r10.body, rest], ['abcdef', '']);
  const c = new Client((await main).port);
  c.send(`GET /nolength HTTP/1.1\r\n${H}\r\n`);
  const [r] = await c.responses(1);
  assert.deepEqual([r.headers['transfer-encoding'], r.body], ['chunked', 'abcdef']);
  assert.match(c.data, /\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n$/);
  c.send(`GET /next HTTP/1.1\r\n${H}\r\n`);
  assert.equal(JSON.parse((await c.responses(2))[1].body).url, '/next');
});

test('answers to HEAD and 204 carry no body, so the next answer on the connection reads right', async () => {
  const c = new Client((await main).port);
  // Pipelined, and answered synchronously from onRequest (before each request's end is handed on).
  c.send(['HEAD /nolength', 'GET /204', 'GET /after'].map((line) => `${line} HTTP/1.1\r\n${H}\r\n`).join(''));
  const rs = await c.responses(3, [0]);
  assert.deepEqual(rs.map((r) => r.status), [200, 204, 200]);
  assert.equal(rs[0].headers['transfer-encoding'], undefined);
  assert.equal(rs[0].headers.connection, 'keep-alive');
  assert.equal(JSON.parse(rs[2].body).url, '/after');
  assert.equal(c.parsed([0]).rest, '');
});

test('an HTTP/1.0 request with Expect: 100-continue gets no 1xx answer (RFC 9110 10.1.1, 15.2)', async () => {
  const c = new Client((await main).port);
  c.send('PUT /up10 HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\ndata');
  await until(() => c.ended, 'the connection to end');
  assert.match(c.data, /^HTTP\/1\.1 200 /);
});

test('Expect: 100-continue gets HTTP/1.1 100 Continue before the final answer', async () => {
  const c = new Client((await main).port);
  c.send(`PUT /up HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 4\r\n\r\n`);
  await until(() => c.data.length > 0, 'the interim answer');
  assert.equal(c.data, 'HTTP/1.1 100 Continue\r\n\r\n');
  c.send('data');
  const [r] = await c.responses(1);
  assert.equal(JSON.parse(r.body).body, 'data');
});

const timers = serve({ keepAliveTimeoutMs: 200, headersTimeoutMs: 150 });

test('a head left incomplete is refused with 408 after headersTimeoutMs', async () => {
  const s = await timers;
  const c = new Client(s.port);
  const t0 = Date.now();
  c.send(`GET /slow HTTP/1.1\r\n${H}`);
  await until(() => s.clientErrors.length === 1, 'the client error');
  assert.equal(s.clientErrors[0].status, 408);
  const ms = Date.now() - t0;
  assert.ok(ms >= 140 && ms < 1500, `refused after ${ms} ms`);
  await until(() => c.ended, 'the connection to end');
  assert.match(c.data, /^HTTP\/1\.1 408 /);
});

test('an idle kept-alive connection is closed after keepAliveTimeoutMs', async () => {
  const c = new Client((await timers).port);
  c.send(`GET /once HTTP/1.1\r\n${H}\r\n`);
  await c.responses(1);
  const t0 = Date.now();
  await until(() => c.closed, 'the idle connection to close');
  const ms = Date.now() - t0;
  assert.ok(ms >= 150 && ms < 1500, `closed after ${ms} ms`);
});

test('without requestIdleTimeoutMs a request outlasts keepAliveTimeoutMs; once answered, the connection idles out as before', async () => {
  const c = new Client((await timers).port);
  c.send(`GET /late/400 HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(1))[0].body, 'late');
  const t0 = Date.now();
  await until(() => c.closed, 'the idle connection to close');
  const ms = Date.now() - t0;
  assert.ok(ms >= 150 && ms < 1500, `closed after ${ms} ms`);
});

const longer = serve({ keepAliveTimeoutMs: 150, headersTimeoutMs: 150, requestIdleTimeoutMs: 500 });

test('requestIdleTimeoutMs longer than keepAliveTimeoutMs: counted from the last byte, and a request quiet that long is cut', async () => {
  const s = await longer;
  const c = new Client(s.port);
  c.send(`GET /late/300 HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(1))[0].body, 'late', 'quiet 300 ms: past the keep-alive limit, within the request\'s');
  // Quiet for 400 ms after a byte at 250: 650 ms in all, but never 500 ms without a byte.
  c.send(`GET /trickle HTTP/1.1\r\n${H}\r\n`);
  assert.equal((await c.responses(2))[1].body, 'ok');
  const t0 = Date.now();
  c.send(`POST /hang HTTP/1.1\r\n${H}Content-Length: 10\r\n\r\n`);
  await until(() => c.closed, 'the quiet request to be cut', 3000);
  const ms = Date.now() - t0;
  assert.ok(ms >= 450 && ms < 2000, `cut after ${ms} ms`);
});

test('an early answer drops the rest of its body, which is not read as a request', async () => {
  const s = await main;
  const c = new Client(s.port);
  const body = `GET /smuggled HTTP/1.1\r\n${H}\r\n`;
  c.send(`POST /early HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`);
  await c.responses(1);
  c.send(body);
  await sleep(50);
  c.send(`GET /second HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.equal(rs[0].body, 'early');
  assert.equal(JSON.parse(rs[1].body).url, '/second');
  assert.equal(s.urls.includes('/smuggled'), false);
});

test('after an early answer, a pipelined request sent in the same write as the dropped body is answered', async () => {
  const s = await main;
  const c = new Client(s.port);
  const body = `GET /smuggled2 HTTP/1.1\r\n${H}\r\n`;
  c.send(`POST /early HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`);
  await c.responses(1);
  c.send(`${body}GET /second2 HTTP/1.1\r\n${H}\r\n`);
  const rs = await c.responses(2);
  assert.equal(JSON.parse(rs[1].body).url, '/second2');
  assert.equal(s.urls.includes('/smuggled2'), false);
});

test('a client that destroys its socket mid-request fires reply.onClose with the answer unfinished', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`POST /hang HTTP/1.1\r\n${H}Content-Length: 100\r\n\r\n0123456789`);
  await until(() => s.urls.includes('/hang'), 'the request');
  c.sock.destroy();
  await until(() => s.closes.some((x) => x.url === '/hang'), 'onClose');
  assert.deepEqual(s.closes.filter((x) => x.url === '/hang'), [{ url: '/hang', finished: false, aborted: true }]);
});

test('an Upgrade request hands the socket and exactly the bytes after the head to onUpgrade, and is no longer read', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /ws HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\nHELLO`);
  await until(() => s.upgrades.length === 1, 'onUpgrade');
  const u = s.upgrades[0];
  assert.deepEqual([u.req.url, u.head.toString('latin1')], ['/ws', 'HELLO']);
  const more = `GET /not-a-request HTTP/1.1\r\n${H}\r\n`;
  c.send(more);
  await until(() => Buffer.concat(u.later).toString('latin1') === more, 'the upgraded side to read the bytes');
  await until(() => c.data.endsWith(`echo:${more}`), 'the echo');
  assert.match(c.data, /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  assert.equal(s.urls.includes('/not-a-request') || s.urls.includes('/ws'), false, 'neither is an onRequest');
});

test('a request body paused and resumed by its handler arrives whole (4 MB)', async () => {
  const c = new Client((await main).port);
  const body = randomBytes(4 * 1024 * 1024);
  c.send(Buffer.concat([Buffer.from(`POST /pause HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`), body]));
  const [r] = await c.responses(1, [], 10_000);
  const got = JSON.parse(r.body);
  assert.deepEqual([got.bytes, got.sha], [body.length, createHash('sha256').update(body).digest('hex')]);
  assert.ok(got.pauses >= 4, `paused ${got.pauses} times`);
});

test('a chunked request body is decoded and its trailers arrive on req.trailers', async () => {
  const c = new Client((await main).port);
  c.send(`POST /chunked HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: abc\r\nX-Other: 1\r\n\r\n`);
  const got = JSON.parse((await c.responses(1))[0].body);
  assert.equal(got.body, 'hello world');
  assert.deepEqual(got.trailers, ['X-Sum', 'abc', 'X-Other', '1']);
});

for (const [where, path] of [['a header value', '/crlf'], ['the status text', '/crlf-status']]) {
  test(`writeHead with CR/LF in ${where} throws InvalidHeaderError and writes nothing`, async () => {
    const s = await main;
    const c = new Client(s.port);
    const errors = s.headerErrors.length;
    c.send(`GET ${path} HTTP/1.1\r\n${H}\r\n`);
    const rs = await c.responses(1);
    assert.equal(c.data.includes('Injected'), false, c.data);
    assert.ok(s.headerErrors[errors] instanceof InvalidHeaderError);
    assert.deepEqual([rs[0].status, rs[0].body, c.parsed().rest], [500, 'refused, sent=false', '']);
  });
}

test('a handler that throws fires onInternalError and the connection closes unanswered', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /throw HTTP/1.1\r\n${H}\r\n`);
  await until(() => c.closed, 'the connection to close');
  assert.equal(c.data, '');
  assert.equal((s.internalErrors[0] as Error).message, 'handler bug');
});

test('a malformed request gets onClientError, and nothing later on that connection is served', async () => {
  const s = await main;
  const c = new Client(s.port);
  c.send(`GET /bad HTTP/1.1\r\n${H}Bad Header: y\r\n\r\nGET /after-bad HTTP/1.1\r\n${H}\r\n`);
  await until(() => c.ended, 'the connection to end');
  assert.equal(s.clientErrors.at(-1)?.status, 400);
  assert.deepEqual(c.parsed().all.map((r) => r.status), [400]);
  assert.equal(s.urls.includes('/bad') || s.urls.includes('/after-bad'), false);
});

test('closeAll() ends open connections, idle or mid-request', async () => {
  const s = await serve();
  const idle = new Client(s.port);
  idle.send(`GET /i HTTP/1.1\r\n${H}\r\n`);
  await idle.responses(1);
  const busy = new Client(s.port);
  busy.send(`GET /hang HTTP/1.1\r\n${H}\r\n`);
  await until(() => s.urls.includes('/hang'), 'the request');
  assert.equal(s.lean.connectionCount, 2);
  s.lean.closeAll();
  await until(() => idle.closed && busy.closed, 'both connections to close');
  assert.equal(s.lean.connectionCount, 0);
  await until(() => s.closes.find((x) => x.url === '/hang')?.finished === false, 'onClose of the unfinished answer');
});
