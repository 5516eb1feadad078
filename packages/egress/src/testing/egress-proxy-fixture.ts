/**
 * The fixture of the egress-proxy-*.test.ts files: one proxy with its upstreams (HTTPS, plain
 * HTTP, one with a certificate from a CA the proxy does not trust, and a port nobody listens on),
 * and the helpers that call through it and read its audit log.
 *
 * Everything runs on loopback: the sandbox is 127.0.0.1, the upstreams listen on 127.0.0.1 and
 * are reached through the proxy's `resolve` overrides.
 *
 * The state is in exported `let`s, filled by startEgressProxyFixture: an import is a live binding,
 * so the tests read `proxy` and the ports as plain names, as they did when all this was theirs.
 */
import { readAuditRecords } from './audit-file.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { freePort, silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type EgressRule, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressCa } from '../certificates.ts';
import { startEgressProxy, type EgressProxy } from '../egress-proxy.ts';

export const SECRET = 'sk-live-0123456789abcdef';
export const TRANSFORM_SECRET = 'transform-secret-value-42';
export const ADMIN_TOKEN = 'admin-token-for-tests';
const NAMES = ['api.example.test', 'www.example.test', 'a.b.deep.example.test', 'deep.example.test', 'shadow.deep.example.test', 'example.test', 'plain.example.test', 'quiet.example.test', 'untrusted.example.test', 'down.example.test'];

export let dir: string;
let upstreamCa: EgressCa;
let httpsUp: https.Server;
let httpUp: http.Server;
let untrustedUp: https.Server;
export let HTTPS_PORT: number;
export let HTTP_PORT: number;
export let UNTRUSTED_PORT: number;
export let DOWN_PORT: number;
export let proxy: EgressProxy;
export let policySourceCalls = 0;
export const upstreamConnections = { https: 0, http: 0 };
export let openUpstreamRequests = 0;

function echo(req: http.IncomingMessage, res: http.ServerResponse): void {
  openUpstreamRequests++;
  res.once('close', () => { openUpstreamRequests--; });
  if (req.url?.startsWith('/hang')) return; // answers never; the proxy must let go when the sandbox does
  if (req.url?.startsWith('/die')) { res.writeHead(200, { 'content-length': '100' }); res.write('only part'); setTimeout(() => req.socket.destroy(), 20); return; }
  if (req.url?.startsWith('/slow')) { res.writeHead(200, { 'content-type': 'text/plain' }); res.write('first chunk\n'); return; }
  let bytes = 0;
  req.on('data', (c: Buffer) => { bytes += c.length; });
  req.on('end', () => {
    const body = JSON.stringify({ method: req.method, url: req.url, headers: req.rawHeaders, bodyBytes: bytes });
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes', connection: 'keep-alive, x-hop', 'x-hop': 'drop me' });
    res.end(body);
  });
}

export function rules(): EgressRule[] {
  const https = (name: string, match: EgressRule['match'], action: EgressRule['action'] = { allow: true }): EgressRule => ({ name, match: { scheme: 'https', port: HTTPS_PORT, ...match }, action });
  return [
    https('inject-api', { host: 'api.example.test', path: '/inject/*' }, { allow: true, inject: [{ header: 'Authorization', format: 'Bearer ${SECRET}', secret: SECRET }] }),
    https('admin-health', { host: 'api.example.test', path: '/v1/admin/health' }),
    { name: 'block-admin', match: { host: 'api.example.test', path: '/v1/admin*' }, action: { allow: false } },
    https('public-upload', { host: 'api.example.test', path: '/v1/public/*', method: ['POST', 'PUT'] }),
    https('api-get', { host: 'api.example.test', method: ['GET', 'HEAD'] }),
    { name: 'shadow', match: { host: 'shadow.deep.example.test' }, action: { allow: false } },
    https('wild', { host: '*.deep.example.test' }),
    https('by-ip', { host: '127.0.0.1' }),
    { name: 'plain-http', match: { scheme: 'http', port: HTTP_PORT, host: 'plain.example.test' }, action: { allow: true } },
    { name: 'quiet', match: { scheme: 'http', port: HTTP_PORT, host: 'quiet.example.test' }, action: { allow: true, audit: 'none' } },
    { name: 'untrusted', match: { scheme: 'https', port: UNTRUSTED_PORT, host: 'untrusted.example.test' }, action: { allow: true } },
    { name: 'down', match: { scheme: 'https', port: DOWN_PORT, host: 'down.example.test' }, action: { allow: true } },
  ];
}

export const sandboxPolicy = (): SandboxEgressPolicy => ({ sandboxId: 'sbx-test', address: '127.0.0.1', rules: rules() });

/** The upstreams and the proxy, in a new directory; the proxy's policy source fails twice before it answers. */
export async function startEgressProxyFixture(): Promise<void> {
  dir = await mkdtemp(join(tmpdir(), 'egress-proxy-'));
  upstreamCa = await EgressCa.loadOrCreate(join(dir, 'upstream-ca'));
  const ipLeaf = upstreamCa.leafFor('127.0.0.1');
  httpsUp = https.createServer({
    cert: ipLeaf.cert, key: ipLeaf.key,
    SNICallback: (name, cb) => { const l = upstreamCa.leafFor(name); cb(null, tls.createSecureContext({ cert: l.cert, key: l.key })); },
  }, echo);
  httpsUp.on('connection', () => { upstreamConnections.https++; });
  httpUp = http.createServer(echo);
  httpUp.on('connection', () => { upstreamConnections.http++; });
  const stranger = await EgressCa.loadOrCreate(join(dir, 'stranger-ca'));
  const strangerLeaf = stranger.leafFor('untrusted.example.test');
  untrustedUp = https.createServer({ cert: strangerLeaf.cert, key: strangerLeaf.key }, echo);
  HTTPS_PORT = await listen(httpsUp);
  HTTP_PORT = await listen(httpUp);
  UNTRUSTED_PORT = await listen(untrustedUp);
  DOWN_PORT = await freePort();

  proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: ADMIN_TOKEN,
    caDir: join(dir, 'egress-ca'),
    auditLogPath: join(dir, 'log', 'svc-egress', 'access.jsonl'),
    resolve: Object.fromEntries(NAMES.map((n) => [n, '127.0.0.1'])),
    upstreamCa: upstreamCa.caPem,
    policySource: async () => {
      // Fails twice, as a master that is not up yet would.
      if (++policySourceCalls <= 2) throw new Error(`master not reachable (attempt ${policySourceCalls})`);
      return [sandboxPolicy()];
    },
    originalDestination: async () => ({ ip: '127.0.0.1', port: HTTPS_PORT }),
    logger: silentLogger(),
  });
}

export async function stopEgressProxyFixture(): Promise<void> {
  await proxy?.close();
  for (const s of [httpsUp, httpUp, untrustedUp]) { s?.closeAllConnections(); s?.close(); }
  await rm(dir, { recursive: true, force: true });
}

export function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
}

export interface Call {
  scheme?: 'http' | 'https';
  /** The name the sandbox asks for (Host and SNI). */
  host: string;
  port?: number;
  path?: string;
  method?: string;
  headers?: Record<string, string>;
  /** The TLS server name when it differs from the host; null for none. */
  servername?: string | null;
  body?: string | Buffer;
  agent?: http.Agent | false;
  localAddress?: string;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: { code?: number; message?: string; headers?: string[]; bodyBytes?: number; url?: string; method?: string };
}

export function call(c: Call): Promise<Answer> {
  return request({ ...c, proxyPort: (c.scheme ?? 'https') === 'https' ? proxy.httpsPort : proxy.httpPort, ca: proxy.caPem });
}

export function request(c: Call & { proxyPort: number; ca: string }): Promise<Answer> {
  const scheme = c.scheme ?? 'https';
  const port = c.port ?? (scheme === 'https' ? HTTPS_PORT : HTTP_PORT);
  const servername = c.servername === null ? undefined : c.servername ?? (net.isIP(c.host) ? undefined : c.host);
  const options: https.RequestOptions = {
    host: '127.0.0.1',
    port: c.proxyPort,
    method: c.method ?? 'GET',
    path: c.path ?? '/',
    headers: { host: `${c.host}:${port}`, ...c.headers },
    agent: c.agent ?? false,
    ...(c.localAddress ? { localAddress: c.localAddress } : {}),
    ...(scheme === 'https' ? { ca: c.ca, ...(servername ? { servername } : {}) } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (scheme === 'https' ? https : http).request(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let json = {};
        try { json = JSON.parse(text); } catch { /* not every answer is JSON (HEAD, text bodies) */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(c.body);
  });
}

export function auditLines(): Promise<Array<Record<string, unknown>>> {
  return readAuditRecords(join(dir, 'log', 'svc-egress', 'access.jsonl'));
}

export async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 3_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The audit lines that satisfy `match`, once at least one is there (records are written as responses close). */
export const auditFind = (match: (r: Record<string, unknown>) => boolean, what: string) =>
  eventually(async () => (await auditLines()).find(match), what);

export async function admin(method: string, path: string, opts: { token?: string; body?: unknown; port?: number } = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://127.0.0.1:${opts.port ?? proxy.adminPort}${path}`, {
    method,
    headers: { ...(opts.token !== undefined ? { [EGRESS_ADMIN_TOKEN_HEADER]: opts.token } : {}), ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

export function headerMap(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) out[raw[i].toLowerCase()] = raw[i + 1];
  return out;
}
