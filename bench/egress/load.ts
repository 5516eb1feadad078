/**
 * The egress bench's load generator: a lean HTTP/1.1 client on raw sockets (tls.connect /
 * net.connect), the same code for the direct path and through the proxy; latency per request
 * and requests/s, on keep-alive connections or a new connection each; and node's own https
 * client under the same load, to calibrate against.
 */
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { KeepAliveConn, parseResponse } from '../lib/http1-client.ts';
import { HOST } from './peers.ts';

export interface Target {
  name: string;
  scheme: 'http' | 'https';
  port: number;
  /** For https: the CA to trust (the upstream's, or the proxy's). */
  ca?: string;
  /** Made once: tls.connect with `ca` would build a context per connection (about 1 ms of client CPU each). */
  context?: tls.SecureContext;
  /** One keep-alive request. */
  request: Buffer;
  /** The same request with Connection: close, for a connection of its own. */
  requestClose: Buffer;
}

export function target(name: string, scheme: 'http' | 'https', port: number, upstreamPort: number, ca?: string): Target {
  // The Host carries the upstream's port: what a sandbox sends, and what the proxy forwards to.
  const head = `GET /bench HTTP/1.1\r\nHost: ${HOST}:${upstreamPort}\r\nAccept: application/json\r\n`;
  const context = ca ? tls.createSecureContext({ ca }) : undefined;
  return { name, scheme, port, ca, context, request: Buffer.from(`${head}\r\n`), requestClose: Buffer.from(`${head}Connection: close\r\n\r\n`) };
}

function open(t: Target): net.Socket {
  if (t.scheme === 'http') return net.connect({ host: '127.0.0.1', port: t.port, noDelay: true });
  const socket = tls.connect({ host: '127.0.0.1', port: t.port, servername: HOST, secureContext: t.context, ALPNProtocols: ['http/1.1'] });
  socket.setNoDelay(true);
  return socket;
}

/** One request on a connection of its own: connect, handshake, request, response; then the client closes. */
function oneShot(t: Target): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = open(t);
    let buf: Buffer = Buffer.alloc(0);
    let settled = false;
    socket.once(t.scheme === 'https' ? 'secureConnect' : 'connect', () => socket.write(t.requestClose));
    socket.on('data', (d: Buffer) => {
      if (settled) return;
      buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
      const parsed = parseResponse(buf);
      if (parsed === null) return;
      settled = true;
      resolve(parsed.status);
      socket.end();
    });
    socket.on('error', (err) => { if (!settled) { settled = true; reject(err); } socket.destroy(); });
    socket.once('close', () => { if (!settled) { settled = true; reject(new Error(`${t.name}: closed before the response`)); } });
  });
}

const check = (t: Target, status: number) => { if (status !== 200) throw new Error(`${t.name}: HTTP ${status}`); };

export async function keepAliveLatency(t: Target, n: number): Promise<number[]> {
  const conn = new KeepAliveConn(() => open(t), t.scheme === 'https' ? 'secureConnect' : 'connect', t.request, t.name);
  await conn.ready;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const status = await conn.send();
    out[i] = Number(process.hrtime.bigint() - t0) / 1e6;
    check(t, status);
  }
  conn.close();
  return out;
}

export async function newConnectionLatency(t: Target, n: number): Promise<number[]> {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    check(t, await oneShot(t));
    out[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  return out;
}

export async function keepAliveRate(t: Target, connections: number, seconds: number) {
  const conns = Array.from({ length: connections }, () => new KeepAliveConn(() => open(t), t.scheme === 'https' ? 'secureConnect' : 'connect', t.request, t.name));
  await Promise.all(conns.map((c) => c.ready));
  let requests = 0;
  const until = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(conns.map(async (c) => {
    while (Date.now() < until) {
      check(t, await c.send());
      requests++;
    }
  }));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  for (const c of conns) c.close();
  return { requests, seconds: secs, errors: 0 };
}

export async function newConnectionRate(t: Target, connections: number, seconds: number) {
  let requests = 0;
  let errors = 0;
  let lastError = '';
  const until = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: connections }, async () => {
    while (Date.now() < until) {
      try {
        check(t, await oneShot(t));
        requests++;
      } catch (err) {
        errors++;
        lastError = (err as Error).message;
      }
    }
  }));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  if (errors > requests / 100) throw new Error(`${t.name}: ${errors} failed connections of ${requests + errors} (last: ${lastError})`);
  return { requests, seconds: secs, errors };
}

/** The same keep-alive load through node's own https client, to see whether the hand-written one is the lighter. */
export async function nodeAgentRate(t: Target, connections: number, seconds: number) {
  const agent = new https.Agent({ keepAlive: true, maxSockets: connections, ca: t.ca });
  const get = () => new Promise<number>((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: t.port, path: '/bench', servername: HOST, agent, headers: { host: `${HOST}:${t.port}`, accept: 'application/json' } }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end();
  });
  let requests = 0;
  const until = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: connections }, async () => {
    while (Date.now() < until) { check(t, await get()); requests++; }
  }));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  agent.destroy();
  return { requests, seconds: secs, errors: 0 };
}
