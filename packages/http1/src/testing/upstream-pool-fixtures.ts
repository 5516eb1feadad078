/**
 * Test wiring for the upstream pool: a per-test `test` with a 5 s limit, a recording sink and a
 * one-exchange helper, scripted TCP and node http backends closed when the test ends, dials
 * (counting, and to a connected socket as a proxy's tunnel hands it over), and a pool closed
 * when the test ends.
 */
import { test as nodeTest, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import { requestHead } from '../request-head.ts';
import { UpstreamPool, type Dial, type ResponseSink, type UpstreamConnection, type UpstreamConnectionError, type UpstreamPoolOptions } from '../upstream-pool.ts';

/** A broken pool fails a test in 5 s rather than hang on an exchange that never settles. */
export const test = (name: string, fn: (t: TestContext) => Promise<void> | void) => nodeTest(name, { timeout: 5000 }, fn);

export const HOST = '127.0.0.1';
export const GET = requestHead('GET', '/', ['Host', 'backend']);
export const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';

interface Outcome {
  /** Every callback in order, so a doubled or missing one shows. */
  events: string[];
  status?: number; body: string; keepAlive?: boolean; error?: UpstreamConnectionError; responseStarted?: boolean;
}

/** A sink that records what it is told; `done` settles on the exchange's completion or failure. */
export function recorder(): { sink: ResponseSink; seen: Outcome; done: Promise<Outcome> } {
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
export function exchange(conn: UpstreamConnection, head = GET, connectTimeoutMs = 2000): Promise<Outcome> {
  const r = recorder();
  conn.start(r.sink, head, false, false, connectTimeoutMs);
  return r.done;
}

/** `closed[i]` settles when the i-th accepted connection has closed. */
interface Backend { port: number; sockets: Socket[]; closed: Array<Promise<unknown>> }

/** A TCP server scripted per connection, which it reads; all of it closes when the test ends. */
export async function tcpBackend(t: TestContext, onSocket: (s: Socket) => void): Promise<Backend> {
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
export async function httpBackend(t: TestContext, handler: http.RequestListener): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server = http.createServer(handler);
  server.on('connection', () => { connections++; });
  server.listen(0, HOST);
  await once(server, 'listening');
  t.after(async () => { server.closeAllConnections(); server.close(); await once(server, 'close'); });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

/** Calls `onRequest` with each whole request (head, and a Content-Length body) a connection carries. */
export function eachRequest(s: Socket, onRequest: (raw: string) => void): void {
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
export function countingDial(port: number): Dial & { count: number; sockets: Socket[] } {
  const dial = Object.assign(() => {
    dial.count++;
    const socket = net.connect(port, HOST);
    dial.sockets.push(socket);
    return { socket, ready: 'connect' as const };
  }, { count: 0, sockets: [] as Socket[] });
  return dial;
}

/** A socket connected to `port`, as a proxy's tunnel hands it over. */
export async function connected(port: number): Promise<Socket> {
  const socket = net.connect(port, HOST);
  await once(socket, 'connect');
  return socket;
}

export function pool(t: TestContext, o: Partial<UpstreamPoolOptions> = {}): UpstreamPool {
  const p = new UpstreamPool({ ...o, idleMs: o.idleMs ?? 5000 });
  t.after(() => p.closeAll());
  return p;
}

export function assertTimeout(out: Outcome, timeout: 'connect' | 'io', timeoutMs: number): void {
  const { events, error, responseStarted } = out;
  assert.deepEqual([events, error?.code, error?.timeout, error?.timeoutMs, responseStarted], [['failure'], 'ETIMEDOUT', timeout, timeoutMs, false]);
}
