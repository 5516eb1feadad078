import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { silentLogger } from '@svc/common';
import type { EgressRule, SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressCa } from './certificates.ts';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';
import { readAuditRecords } from './testing/audit-file.ts';

/**
 * The fixture of egress-tunnels.test.ts and egress-connect.test.ts (WebSocket upgrades and
 * CONNECT through the egress proxy), all on loopback: the sandbox is 127.0.0.1 (and 127.0.0.2
 * for a second policy), the upstreams listen on 127.0.0.1 and are reached through the proxy's
 * `resolve` overrides.
 */

export const SECRET = 'ws-secret-0123456789';
export const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const NAMES = ['ws.example.test', 'wss.example.test', 'denied.example.test', 'tls.example.test', 'echo.example.test', 'inject.example.test', 'path.example.test', 'portless.example.test', 'fallback.example.test', 'transform.example.test', 'other.example.test'];

/** What the tests read, filled by startKit. */
export const kit = {
  dir: '',
  upstreamCa: undefined as unknown as EgressCa,
  proxy: undefined as unknown as EgressProxy,
  /** The upstreams: WebSocket over http and https, an https server, a TCP echo. */
  ports: { wsHttp: 0, wsHttps: 0, tls: 0, echo: 0 },
  /** Connections each kind of upstream got. */
  contacts: { ws: 0, echo: 0 },
  /** The upgrade requests the WebSocket upstreams saw, with their headers. */
  upgrades: [] as Array<{ url: string; headers: Record<string, string> }>,
};
let servers: net.Server[] = [];

/** A WebSocket upstream: 101 with the Accept key and a greeting in the same write, then an echo of every byte; `/refuse` answers 403, `/switch-h2c` a 101 to h2c. */
function onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  kit.contacts.ws++;
  kit.upgrades.push({ url: req.url ?? '', headers: headerMap(req.rawHeaders) });
  socket.on('error', () => { /* the proxy closing the tunnel may reset it; nothing to check here */ });
  if (req.url?.startsWith('/refuse')) {
    // Chunked and kept open: the proxy must find the body's end itself and close.
    socket.write('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Why: no-ws\r\n\r\n5\r\nnope!\r\n0\r\n\r\n');
    socket.on('end', () => socket.end()); // node's server sockets stay half-open otherwise
    return;
  }
  if (req.url?.startsWith('/switch-h2c')) {
    // An upstream that switches to another protocol than the one asked for.
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\nPRI-bytes');
    socket.on('end', () => socket.end());
    return;
  }
  const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}${WS_GUID}`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\nhello`);
  if (head.length) socket.write(head);
  socket.on('data', (d: Buffer) => socket.write(d));
  socket.on('end', () => socket.end());
}

export function rules(): EgressRule[] {
  return [
    { name: 'ws-http', match: { scheme: 'http', port: kit.ports.wsHttp, host: 'ws.example.test' }, action: { allow: true, inject: [{ header: 'X-Api-Key', secret: SECRET }] } },
    { name: 'ws-https', match: { scheme: 'https', port: kit.ports.wsHttps, host: 'wss.example.test' }, action: { allow: true, inject: [{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: SECRET }] } },
    { name: 'denied', match: { host: 'denied.example.test' }, action: { allow: false } },
    { name: 'tls', match: { scheme: 'https', port: kit.ports.tls, host: 'tls.example.test' }, action: { allow: true } },
    { name: 'echo', match: { scheme: 'https', port: kit.ports.echo, host: 'echo.example.test' }, action: { allow: true } },
    { name: 'inject', match: { scheme: 'https', port: kit.ports.echo, host: 'inject.example.test' }, action: { allow: true, inject: [{ header: 'X-Key', secret: SECRET }] } },
    { name: 'with-path', match: { scheme: 'https', port: kit.ports.echo, host: 'path.example.test', path: '/x*' }, action: { allow: true } },
    { name: 'portless', match: { host: 'portless.example.test' }, action: { allow: true } },
  ];
}

/** The second sandbox (127.0.0.2): no rules, E2B's layer-3 lists, and a transform. */
export const fallbackPolicy = (denyOut: string[] = []): SandboxEgressPolicy => ({
  sandboxId: 'sbx-fallback', address: '127.0.0.2', rules: [],
  // With denyOut, internet access on: the request is decided by its address, which denyOut holds.
  fallback: { allowInternetAccess: denyOut.length > 0, allowOut: denyOut.length ? [] : ['127.0.0.0/8'], denyOut },
  transforms: [{ host: 'transform.example.test', inject: [{ header: 'X-T', secret: SECRET }] }],
});

export async function startKit(): Promise<void> {
  const dir = kit.dir = await mkdtemp(join(tmpdir(), 'egress-tunnels-'));
  const upstreamCa = kit.upstreamCa = await EgressCa.loadOrCreate(join(dir, 'upstream-ca'));
  const sni = (name: string, cb: (err: Error | null, ctx: tls.SecureContext) => void) => { const l = upstreamCa.leafFor(name); cb(null, tls.createSecureContext({ cert: l.cert, key: l.key })); };
  const ipLeaf = upstreamCa.leafFor('127.0.0.1');
  const plain = (_req: http.IncomingMessage, res: http.ServerResponse) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end('plain answer'); };
  const wsHttp = http.createServer(plain).on('upgrade', onUpgrade);
  const wsHttps = https.createServer({ cert: ipLeaf.cert, key: ipLeaf.key, SNICallback: sni }, plain).on('upgrade', onUpgrade);
  const tlsUp = https.createServer({ cert: ipLeaf.cert, key: ipLeaf.key, SNICallback: sni }, (req, res) => {
    const body = `tls upstream saw ${req.url}`;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  const echoUp = net.createServer((s) => {
    kit.contacts.echo++;
    s.on('error', () => { /* a reset from the proxy's side at the end of a test */ });
    s.pipe(s);
  });
  servers = [wsHttp, wsHttps, tlsUp, echoUp];
  const { ports } = kit;
  ports.wsHttp = await listen(wsHttp);
  ports.wsHttps = await listen(wsHttps);
  ports.tls = await listen(tlsUp);
  ports.echo = await listen(echoUp);
  const proxy = kit.proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'),
    auditLogPath: join(kit.dir, 'access.jsonl'),
    resolve: Object.fromEntries(NAMES.map((n) => [n, '127.0.0.1'])),
    upstreamCa: upstreamCa.caPem,
    originalDestination: async () => ({ ip: '127.0.0.1', port: ports.wsHttps }),
    logger: silentLogger(),
  });
  proxy.store.put({ sandboxId: 'sbx-tunnels', address: '127.0.0.1', rules: rules() });
  proxy.store.put(fallbackPolicy());
}

export async function stopKit(): Promise<void> {
  await kit.proxy?.close();
  for (const s of servers) {
    if (s instanceof http.Server) s.closeAllConnections();
    s.close();
  }
  if (kit.dir) await rm(kit.dir, { recursive: true, force: true });
}

export function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
}

function headerMap(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) out[raw[i].toLowerCase()] = raw[i + 1];
  return out;
}

/** Reads a socket up to the end of an HTTP head; `rest` is what came after it. */
export function readHead(socket: Duplex): Promise<{ status: number; head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      socket.pause();
      const head = buf.subarray(0, end).toString();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), head, rest: buf.subarray(end + 4) });
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.once('end', () => reject(new Error(`the connection ended before a whole head: ${JSON.stringify(buf.toString())}`)));
  });
}

/** Reads until at least `n` bytes came (after `first`). */
export function readBytes(socket: Duplex, n: number, first: Buffer = Buffer.alloc(0)): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = first;
    if (buf.length >= n) { resolve(buf); return; }
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length < n) return;
      socket.off('data', onData);
      resolve(buf);
    };
    socket.on('data', onData);
    socket.resume();
    socket.once('error', reject);
  });
}

/** Everything until the other side closes. */
export function readToEnd(socket: Duplex, first: Buffer = Buffer.alloc(0)): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks = [first];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('end', () => resolve(Buffer.concat(chunks)));
    socket.once('error', reject);
    socket.resume();
  });
}

export function connectTo(port: number, localAddress?: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) }, () => resolve(s));
    s.once('error', reject);
  });
}

export function tlsTo(port: number, servername: string): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername, ca: kit.proxy.caPem }, () => resolve(s));
    s.once('error', reject);
  });
}

export function upgradeRequest(host: string, port: number, path: string, extra = ''): string {
  const key = Buffer.from(`key-${path}`.padEnd(16, '-').slice(0, 16)).toString('base64');
  return `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n${extra}\r\n`;
}

/** CONNECT on a new connection to the proxy's HTTP listener; the socket is left just after the answer's head. */
export async function connect(target: string, localAddress?: string): Promise<{ socket: net.Socket; status: number; head: string; rest: Buffer }> {
  const socket = await connectTo(kit.proxy.httpPort, localAddress);
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  return { socket, ...(await readHead(socket)) };
}

export function auditLines(): Promise<Array<Record<string, unknown>>> {
  return readAuditRecords(join(kit.dir, 'access.jsonl'));
}

export async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 3_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const auditFind = (match: (r: Record<string, unknown>) => boolean, what: string) => eventually(async () => (await auditLines()).find(match), what);

