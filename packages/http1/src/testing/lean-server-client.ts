/**
 * Test wiring for the lean HTTP/1.1 server: a raw socket client that sends exactly the test's
 * bytes and splits what comes back into responses, and `serve()`, a LeanServer whose handler
 * echoes each request (some paths behave specially) and records what the server reported.
 * Each test file closes what it started with `closeServed()` in its `after` hook.
 */
import { createHash } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { LeanServer, type LeanServerOptions } from '../lean-server.ts';
import type { RequestParseError } from '../request-parser.ts';
import type { ServerReply } from '../server-reply.ts';
import type { ServerRequest } from '../server-request.ts';

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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  for (const t0 = Date.now(); !cond(); await sleep(5)) if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
}

const sockets = new Set<Socket>();
/** A raw client: the bytes sent are exactly the test's; everything received is kept as latin1 text. */
export class Client {
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
export async function serve(o: LeanServerOptions = { keepAliveTimeoutMs: 5000, headersTimeoutMs: 5000 }): Promise<Served> {
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
      if (path.startsWith('/crlf')) { // a CR/LF (or U+010D U+010A, which latin1 makes CR LF) in a header value, or in the status text
        try {
          if (path === '/crlf') reply.writeHead(200, undefined, ['X-Bad', 'a\r\nInjected: yes']);
          else if (path === '/crlf-wide') reply.writeHead(200, undefined, ['X-Bad', 'a\u010D\u010AInjected: yes']);
          else if (path === '/crlf-name') reply.writeHead(200, undefined, ['X-Bad\u010D\u010AInjected', 'yes']);
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

/** Destroys every client socket and closes every server `serve()` started: a test file's `after` hook. */
export async function closeServed(): Promise<void> {
  for (const sock of sockets) sock.destroy();
  await Promise.all(served.map((s) => { s.lean.closeAll(); return new Promise((r) => s.server.close(r)); }));
}

export const H = 'Host: x\r\n';
