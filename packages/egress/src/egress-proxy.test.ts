import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import tls from 'node:tls';
import { freePort, silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, REDACTED, type EgressRule, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressCa } from './certificates.ts';
import { startEgressProxy, type EgressProxy } from './egress-proxy.ts';

// Everything runs on loopback: the sandbox is 127.0.0.1, the upstreams listen on 127.0.0.1 and
// are reached through the proxy's `resolve` overrides.

const SECRET = 'sk-live-0123456789abcdef';
const TRANSFORM_SECRET = 'transform-secret-value-42';
const ADMIN_TOKEN = 'admin-token-for-tests';
const NAMES = ['api.example.test', 'www.example.test', 'a.b.deep.example.test', 'deep.example.test', 'shadow.deep.example.test', 'example.test', 'plain.example.test', 'quiet.example.test', 'untrusted.example.test', 'down.example.test'];

let dir: string;
let upstreamCa: EgressCa;
let httpsUp: https.Server;
let httpUp: http.Server;
let untrustedUp: https.Server;
let HTTPS_PORT: number;
let HTTP_PORT: number;
let UNTRUSTED_PORT: number;
let DOWN_PORT: number;
let proxy: EgressProxy;
let policySourceCalls = 0;
const upstreamConnections = { https: 0, http: 0 };
let openUpstreamRequests = 0;

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

function rules(): EgressRule[] {
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

const sandboxPolicy = (): SandboxEgressPolicy => ({ sandboxId: 'sbx-test', address: '127.0.0.1', rules: rules() });

before(async () => {
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
});

after(async () => {
  await proxy?.close();
  for (const s of [httpsUp, httpUp, untrustedUp]) { s?.closeAllConnections(); s?.close(); }
  await rm(dir, { recursive: true, force: true });
});

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
}

interface Call {
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

function call(c: Call): Promise<Answer> {
  return request({ ...c, proxyPort: (c.scheme ?? 'https') === 'https' ? proxy.httpsPort : proxy.httpPort, ca: proxy.caPem });
}

function request(c: Call & { proxyPort: number; ca: string }): Promise<Answer> {
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

async function auditLines(): Promise<Array<Record<string, unknown>>> {
  const text = await readFile(join(dir, 'log', 'svc-egress', 'access.jsonl'), 'utf8').catch(() => { /* no line written yet: no file */ return ''; });
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** The audit lines that satisfy `match`, once at least one is there (records are written as responses close). */
async function eventually<T>(probe: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 3_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const auditFind = (match: (r: Record<string, unknown>) => boolean, what: string) =>
  eventually(async () => (await auditLines()).find(match), what);

async function admin(method: string, path: string, opts: { token?: string; body?: unknown; port?: number } = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(`http://127.0.0.1:${opts.port ?? proxy.adminPort}${path}`, {
    method,
    headers: { ...(opts.token !== undefined ? { [EGRESS_ADMIN_TOKEN_HEADER]: opts.token } : {}), ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

test('not ready: every request is 403 until the policies are loaded (the source fails twice first)', async () => {
  assert.equal(proxy.ready(), false);
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', path: '/v1/items' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /not ready/);
  const h = await call({ scheme: 'http', host: 'plain.example.test', path: '/x' });
  assert.equal(h.status, 403);
  assert.deepEqual(upstreamConnections, before);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'not_ready', 'a not_ready security event');

  await eventually(() => proxy.ready(), 'the proxy to become ready', 5_000);
  assert.equal(policySourceCalls, 3);
  const health = await admin('GET', '/admin/healthz');
  assert.equal(health.status, 200);
  assert.equal(health.json.ready, true);
  assert.equal(health.json.policies, 1);
  assert.equal(health.json.tasks['policy-bootstrap'].failures, 2);
});

test('an allowed request is forwarded over TLS with the Host as sent; the record carries every field', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/items?page=2', headers: { 'x-client': 'c1', connection: 'keep-alive, x-hop', 'x-hop': '1' } });
  assert.equal(r.status, 200);
  assert.equal(r.headers['x-upstream'], 'yes');
  assert.equal(r.headers['x-hop'], undefined, 'a header the upstream listed in Connection is dropped');
  assert.equal(r.json.url, '/v1/items?page=2');
  const sent = headerMap(r.json.headers ?? []);
  assert.equal(sent.host, `api.example.test:${HTTPS_PORT}`);
  assert.equal(sent['x-client'], 'c1');
  assert.equal(sent['x-hop'], undefined);
  const rec = await auditFind((l) => l.path === '/v1/items?page=2' && l.type === undefined, 'the request record');
  assert.deepEqual(Object.keys(rec).sort(), ['bytes_in', 'bytes_out', 'cipher', 'dst_ip', 'dst_port', 'host', 'latency_ms', 'method', 'path', 'rule', 'sandbox_id', 'sandbox_ip',
    'scheme', 'status', 'tls_version', 'ts', 'upstream_addr', 'upstream_status'].sort());
  assert.equal(rec.sandbox_ip, '127.0.0.1');
  assert.equal(rec.sandbox_id, 'sbx-test');
  assert.equal(rec.dst_ip, '127.0.0.1');
  assert.equal(rec.dst_port, HTTPS_PORT);
  assert.equal(rec.scheme, 'https');
  assert.equal(rec.host, 'api.example.test');
  assert.equal(rec.method, 'GET');
  assert.equal(rec.status, 200);
  assert.equal(rec.upstream_status, '200');
  assert.equal(rec.upstream_addr, `127.0.0.1:${HTTPS_PORT}`);
  assert.equal(rec.bytes_out, Buffer.byteLength(r.text));
  assert.equal(rec.rule, 'api-get');
  assert.match(String(rec.tls_version), /^TLSv1\.[23]$/);
  assert.ok(String(rec.cipher).length > 0);
  assert.match(String(rec.ts), /[+-]\d{2}:\d{2}$/);
});

test('a request body streams through and is counted', async () => {
  const body = Buffer.alloc(300_000, 7);
  const r = await call({ host: 'api.example.test', path: '/v1/public/upload', method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
  assert.equal(r.status, 200);
  assert.equal(r.json.bodyBytes, body.length);
  const rec = await auditFind((l) => l.path === '/v1/public/upload', 'the upload record');
  assert.equal(rec.bytes_in, body.length);
  assert.equal(rec.rule, 'public-upload');
});

test('plain HTTP is forwarded; a rule with audit none writes no request record', async () => {
  const r = await call({ scheme: 'http', host: 'plain.example.test', path: '/over-http' });
  assert.equal(r.status, 200);
  const rec = await auditFind((l) => l.path === '/over-http', 'the http record');
  assert.equal(rec.tls_version, '');
  assert.equal(rec.cipher, '');
  assert.equal(rec.rule, 'plain-http');
  const q = await call({ scheme: 'http', host: 'quiet.example.test', path: '/quiet' });
  assert.equal(q.status, 200);
  await call({ scheme: 'http', host: 'plain.example.test', path: '/after-quiet' });
  await auditFind((l) => l.path === '/after-quiet', 'the record after');
  assert.equal((await auditLines()).some((l) => l.path === '/quiet'), false);
});

test('denied by rule: 403 naming the rule, and the upstream never sees a connection', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', path: '/v1/admin/users' });
  assert.equal(r.status, 403);
  assert.deepEqual(r.json, { code: 403, message: 'egress denied by rule block-admin' });
  // A deny rule without a port covers every port, here the plain HTTP one.
  const h = await call({ scheme: 'http', host: 'api.example.test', port: HTTP_PORT, path: '/v1/admin/x' });
  assert.equal(h.status, 403);
  assert.deepEqual(upstreamConnections, before);
  const rec = await auditFind((l) => l.path === '/v1/admin/users', 'the denied record');
  assert.equal(rec.status, 403);
  assert.equal(rec.dst_ip, '');
  assert.equal(rec.upstream_addr, '');
  assert.equal(rec.rule, 'block-admin');
});

test('an allow exception listed before a broad deny', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/admin/health' });
  assert.equal(r.status, 200);
  assert.equal((await call({ host: 'api.example.test', path: '/v1/admin/healthz' })).status, 403);
});

test('method filter: a method outside the list falls through to default deny', async () => {
  assert.equal((await call({ host: 'api.example.test', path: '/v1/items', method: 'HEAD' })).status, 200);
  const r = await call({ host: 'api.example.test', path: '/v1/items', method: 'DELETE' });
  assert.equal(r.status, 403);
  assert.equal(r.json.message, 'egress denied: no rule matched (default deny)');
  await auditFind((l) => l.type === 'security_event' && l.reason === 'default_deny' && l.method === 'DELETE', 'the default_deny event');
});

test('first match wins: an earlier deny shadows a later wildcard allow', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'shadow.deep.example.test', path: '/' });
  assert.equal(r.status, 403);
  assert.equal(r.json.message, 'egress denied by rule shadow');
  assert.deepEqual(upstreamConnections, before);
});

test('a wildcard covers subdomains at any depth but not the apex', async () => {
  const sub = await call({ host: 'a.b.deep.example.test', path: '/wild' });
  assert.equal(sub.status, 200);
  const before = { ...upstreamConnections };
  const apex = await call({ host: 'deep.example.test', path: '/wild' });
  assert.equal(apex.status, 403);
  assert.deepEqual(upstreamConnections, before);
});

test('inject: the upstream gets the secret in place of the client\'s header; no log or admin read shows it', async () => {
  const r = await call({ host: 'api.example.test', path: '/inject/whoami', headers: { authorization: 'Bearer client-made-up', 'AUTHORIZATION-x': 'keep' } });
  assert.equal(r.status, 200);
  const sent = r.json.headers ?? [];
  const auth = sent.filter((_, i) => i % 2 === 0 && sent[i].toLowerCase() === 'authorization').length;
  assert.equal(auth, 1, 'one Authorization header reaches the upstream');
  assert.equal(headerMap(sent).authorization, `Bearer ${SECRET}`);
  assert.equal(headerMap(sent)['authorization-x'], 'keep');
  const fired = await auditFind((l) => l.type === 'security_event' && l.reason === 'inject_fired', 'the inject_fired event');
  assert.equal(fired.rule, 'inject-api');
  assert.match(String(fired.detail), /Authorization/);
  const rec = await auditFind((l) => l.path === '/inject/whoami' && l.type === undefined, 'the inject request record');
  assert.deepEqual(rec.injected, ['Authorization']);
  const logText = await readFile(join(dir, 'log', 'svc-egress', 'access.jsonl'), 'utf8');
  assert.equal(logText.includes(SECRET), false);

  const one = await admin('GET', '/admin/policies/sbx-test', { token: ADMIN_TOKEN });
  assert.equal(one.status, 200);
  assert.equal(one.json.rules[0].action.inject[0].secret, REDACTED);
  const all = await admin('GET', '/admin/policies', { token: ADMIN_TOKEN });
  assert.equal(JSON.stringify(all.json).includes(SECRET), false);
  assert.equal(JSON.stringify(all.json).includes(REDACTED), true);
});

test('inject refuses when Host and SNI differ, and contacts nobody', async () => {
  const before = { ...upstreamConnections };
  const r = await call({ host: 'api.example.test', servername: 'www.example.test', path: '/inject/x' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /does not match the TLS server name www\.example\.test/);
  assert.equal(r.text.includes(SECRET), false);
  assert.deepEqual(upstreamConnections, before);
  const ev = await auditFind((l) => l.type === 'security_event' && l.reason === 'host_sni_mismatch', 'the host_sni_mismatch event');
  assert.equal(ev.rule, 'inject-api');
  assert.equal(ev.sni, 'www.example.test');
});

test('an unknown sandbox address is refused', async () => {
  const r = await call({ host: 'api.example.test', path: '/v1/items', localAddress: '127.0.0.2' });
  assert.equal(r.status, 403);
  assert.match(r.json.message ?? '', /no egress policy for the sandbox at 127\.0\.0\.2/);
  await auditFind((l) => l.type === 'security_event' && l.reason === 'unknown_sandbox' && l.sandbox_ip === '127.0.0.2', 'the unknown_sandbox event');
});

test('a client that aborts mid-handshake leaves a tls_handshake record', async () => {
  const hello = await captureClientHello('abort.example.test');
  await new Promise<void>((resolve, reject) => {
    const s = net.connect(proxy.httpsPort, '127.0.0.1', () => s.write(hello));
    s.once('data', () => { s.destroy(); resolve(); }); // the ServerHello came: leave now
    s.on('error', reject);
  });
  const rec = await auditFind((l) => l.type === 'tls_handshake' && l.sni === 'abort.example.test', 'the tls_handshake record');
  assert.match(String(rec.reason), /closed|handshake/);
  assert.equal(rec.sandbox_id, 'sbx-test');

  // A client that rejects the proxy's certificate (no CA) fails the handshake too.
  await new Promise<void>((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port: proxy.httpsPort, servername: 'distrust.example.test' });
    s.on('error', () => resolve());
  });
  await auditFind((l) => l.type === 'tls_handshake' && l.sni === 'distrust.example.test', 'the record of the refused certificate');
});

test('without SNI the leaf is made for the original destination IP', async () => {
  const r = await call({ host: '127.0.0.1', servername: null, path: '/by-ip' });
  assert.equal(r.status, 200);
  const rec = await auditFind((l) => l.path === '/by-ip', 'the by-ip record');
  assert.equal(rec.rule, 'by-ip');
});

test('upstream failures: untrusted certificate 502, refused 502, unknown name 502; each names the host', async () => {
  const u = await call({ host: 'untrusted.example.test', port: UNTRUSTED_PORT, path: '/' });
  assert.equal(u.status, 502);
  assert.match(u.json.message ?? '', /untrusted\.example\.test presented a certificate that is not trusted/);
  const d = await call({ host: 'down.example.test', port: DOWN_PORT, path: '/' });
  assert.equal(d.status, 502);
  assert.match(d.json.message ?? '', /down\.example\.test .* refused the connection/);
  await proxy.store.put({ ...sandboxPolicy(), rules: [...rules(), { name: 'nowhere', match: { scheme: 'https', host: 'nowhere.invalid' }, action: { allow: true } }] });
  try {
    const n = await call({ host: 'nowhere.invalid', port: 443, path: '/' });
    assert.equal(n.status, 502);
    assert.match(n.json.message ?? '', /cannot resolve upstream host nowhere\.invalid/);
  } finally {
    proxy.store.put(sandboxPolicy());
  }
});

test('timeouts: a silent upstream handshake is a 504 at the connect timeout, a silent response a 504 at the idle timeout', async () => {
  const silent = net.createServer(() => { /* accepts and says nothing, not even a ServerHello */ });
  const silentPort = await listen(silent);
  const quick = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'), auditLogPath: join(dir, 'quick.jsonl'), logger: silentLogger(),
    resolve: { 'silent.example.test': '127.0.0.1', 'plain.example.test': '127.0.0.1' }, connectTimeoutMs: 300, ioTimeoutMs: 500,
  });
  try {
    quick.store.put({ sandboxId: 'sbx-quick', address: '127.0.0.1', rules: [
      { name: 'silent', match: { scheme: 'https', port: silentPort, host: 'silent.example.test' }, action: { allow: true } },
      { name: 'plain', match: { scheme: 'http', port: HTTP_PORT, host: 'plain.example.test' }, action: { allow: true } },
    ] });
    const viaQuick = (c: Call & { port: number }) => request({ ...c, proxyPort: c.scheme === 'http' ? quick.httpPort : quick.httpsPort, ca: quick.caPem });
    const t0 = Date.now();
    const connect = await viaQuick({ host: 'silent.example.test', port: silentPort, path: '/' });
    assert.equal(connect.status, 504);
    assert.match(connect.json.message ?? '', /silent\.example\.test .* did not complete the connection within 0\.3 s/);
    assert.ok(Date.now() - t0 < 3_000);
    const idle = await viaQuick({ scheme: 'http', host: 'plain.example.test', port: HTTP_PORT, path: '/hang-idle' });
    assert.equal(idle.status, 504);
    assert.match(idle.json.message ?? '', /plain\.example\.test .* sent and took nothing for 0\.5 s/);
    await eventually(() => openUpstreamRequests === 0 || undefined, 'the upstream request to be closed');
  } finally {
    await quick.close();
    silent.close();
  }
});

test('an upstream that dies mid-body cuts the sandbox\'s response short', async () => {
  await assert.rejects(call({ scheme: 'http', host: 'plain.example.test', path: '/die' }), /aborted|ECONNRESET|socket hang up/);
  const rec = await auditFind((l) => l.path === '/die', 'the record of the cut response');
  assert.equal(rec.upstream_status, '200');
  assert.equal(rec.bytes_out, 'only part'.length);
});

test('fallback by address: allowed in allowOut, denied in denyOut, with no rule matching', async () => {
  const transforms = [{ host: 'api.example.test', inject: [{ header: 'X-Transform', secret: TRANSFORM_SECRET }] }];
  const put = (fallback: SandboxEgressPolicy['fallback']) => admin('PUT', '/admin/policies/sbx-fallback', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-fallback', address: '127.0.0.1', rules: [], fallback, transforms } });
  try {
    const stored = await put({ allowInternetAccess: false, allowOut: ['127.0.0.0/8'], denyOut: [] });
    assert.equal(stored.status, 200);
    assert.equal(stored.json.transforms[0].inject[0].secret, REDACTED);
    assert.equal(proxy.store.get('sbx-test'), undefined, 'the newer policy at the address displaced the older sandbox');
    const ok = await call({ scheme: 'http', host: 'plain.example.test', path: '/fallback-allowed' });
    assert.equal(ok.status, 200);
    assert.equal(headerMap(ok.json.headers ?? [])['x-transform'], undefined, 'a transform applies only to its host');
    // E2B's transform injects into what the fallback allowed, under the same Host/SNI guard.
    const tlsOk = await call({ host: 'api.example.test', path: '/fallback-tls' });
    assert.equal(tlsOk.status, 200);
    assert.equal(headerMap(tlsOk.json.headers ?? [])['x-transform'], TRANSFORM_SECRET);
    const fired = await auditFind((l) => l.type === 'security_event' && l.reason === 'inject_fired' && l.path === '/fallback-tls', 'the transform\'s inject_fired event');
    assert.equal(fired.rule, 'transform api.example.test');
    const mismatch = await call({ host: 'api.example.test', servername: 'www.example.test', path: '/fallback-mismatch' });
    assert.equal(mismatch.status, 403);

    assert.equal((await put({ allowInternetAccess: true, allowOut: [], denyOut: ['127.0.0.1/32'] })).status, 200);
    const before = { ...upstreamConnections };
    const no = await call({ scheme: 'http', host: 'plain.example.test', path: '/fallback-denied' });
    assert.equal(no.status, 403);
    assert.match(no.json.message ?? '', /deny_out 127\.0\.0\.1\/32/);
    assert.deepEqual(upstreamConnections, before);
    await auditFind((l) => l.type === 'security_event' && l.reason === 'default_deny' && l.path === '/fallback-denied', 'the fallback deny event');
    // Transforms grant nothing: the denied address stays denied, and nothing is injected.
    const deniedTls = await call({ host: 'api.example.test', path: '/fallback-denied-tls' });
    assert.equal(deniedTls.status, 403);
    assert.equal((await readFile(join(dir, 'log', 'svc-egress', 'access.jsonl'), 'utf8')).includes(TRANSFORM_SECRET), false);
  } finally {
    assert.equal((await admin('PUT', '/admin/policies/sbx-test', { token: ADMIN_TOKEN, body: sandboxPolicy() })).status, 200);
  }
});

test('admin API: token checks, validation, CRUD; without a configured token the policy routes answer 503', async () => {
  assert.equal((await admin('GET', '/admin/healthz')).status, 200);
  assert.equal((await admin('GET', '/admin/policies')).status, 403);
  assert.equal((await admin('GET', '/admin/policies', { token: 'wrong' })).status, 403);
  assert.equal((await admin('PUT', '/admin/policies/sbx-x', { token: 'wrong', body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [] } })).status, 403);
  assert.equal((await admin('GET', '/admin/policies/none', { token: ADMIN_TOKEN })).status, 404);

  const mismatch = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-y', address: '10.0.0.9', rules: [] } });
  assert.equal(mismatch.status, 400);
  const cidr = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [{ name: 'n', match: { host: '10.0.0.0/8' }, action: { allow: true } }] } });
  assert.equal(cidr.status, 400);
  assert.match(cidr.json.message, /CIDR/);
  const badAddress = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: 'nope', rules: [] } });
  assert.equal(badAddress.status, 400);
  const badFallback = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [], fallback: { allowInternetAccess: true, allowOut: ['x'], denyOut: [] } } });
  assert.equal(badFallback.status, 400);

  const put = await admin('PUT', '/admin/policies/sbx-x', { token: ADMIN_TOKEN, body: { sandboxId: 'sbx-x', address: '10.0.0.9', rules: [{ match: { scheme: 'https' }, action: { allow: true, inject: [{ header: 'X-Key', secret: 'hidden-value' }] } }] } });
  assert.equal(put.status, 200);
  assert.equal(put.json.rules[0].action.inject[0].secret, REDACTED);
  assert.equal(proxy.store.get('sbx-x')?.rules[0].action.inject?.[0].secret, 'hidden-value');
  assert.equal((await admin('DELETE', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 204);
  assert.equal((await admin('DELETE', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 204);
  assert.equal((await admin('GET', '/admin/policies/sbx-x', { token: ADMIN_TOKEN })).status, 404);

  const open = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0, adminToken: '',
    caDir: join(dir, 'egress-ca'), auditLogPath: join(dir, 'second.jsonl'), logger: silentLogger(),
  });
  try {
    assert.equal(open.ready(), true, 'no policy source: ready at once');
    assert.equal((await admin('GET', '/admin/healthz', { port: open.adminPort })).status, 200);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort })).status, 503);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort, token: '' })).status, 503);
    assert.equal((await admin('GET', '/admin/policies', { port: open.adminPort, token: 'anything' })).status, 503);
    assert.equal(open.caPem, proxy.caPem, 'the same CA directory gives the same root');
  } finally {
    await open.close();
  }
});

test('an upgrade the upstream does not take comes back as its ordinary answer; CONNECT is decided by the rules', async () => {
  // The echo upstream has no upgrade handler: it answers the GET, and the proxy relays that (egress-tunnels.test.ts has the 101s).
  const up = await call({ host: 'api.example.test', path: '/ws', headers: { connection: 'Upgrade', upgrade: 'websocket' } });
  assert.equal(up.status, 200);
  assert.equal(up.json.url, '/ws');
  const answer = await new Promise<string>((resolve, reject) => {
    const s = net.connect(proxy.httpPort, '127.0.0.1', () => s.write('CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n'));
    let text = '';
    s.on('data', (c) => { text += c; });
    s.on('end', () => { s.end(); resolve(text); });
    s.on('error', reject);
  });
  // Its rules allow api.example.test on HTTPS_PORT only, and for GET and HEAD (egress-connect.test.ts has the tunnels).
  assert.match(answer, /^HTTP\/1\.1 403/);
});

test('1,000 requests (keep-alive, new connections, denied, aborted) leak no sockets or descriptors', async () => {
  const fds = () => readdirSync('/proc/self/fd').length;
  const round = async (n: number) => {
    const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 4 });
    const kinds: Array<() => Promise<unknown>> = [
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/ka', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/ka', agent: httpsAgent }),
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/ka', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/new' }),
      () => call({ scheme: 'http', host: 'plain.example.test', path: '/new' }),
      () => call({ host: 'api.example.test', path: '/v1/admin/x', agent: httpsAgent }),
      () => call({ scheme: 'http', host: 'example.test', path: '/denied', agent: httpAgent }),
      () => call({ host: 'api.example.test', path: '/v1/items', method: 'POST', body: 'x'.repeat(1000), agent: httpsAgent }),
      () => aborted({ host: 'api.example.test', path: '/hang' }, 'before-response'),
      () => aborted({ scheme: 'http', host: 'plain.example.test', path: '/slow' }, 'mid-body'),
    ];
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        await kinds[i % kinds.length]();
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    httpAgent.destroy();
    httpsAgent.destroy();
    await eventually(() => openUpstreamRequests === 0 || undefined, 'the upstream to see every aborted request closed');
  };
  await round(100); // warms the pools up to their working size
  await new Promise((r) => setTimeout(r, 200));
  const fdsBefore = fds();
  const t0 = performance.now();
  await round(1000);
  const elapsed = performance.now() - t0;
  const fdsAfter = await eventually(async () => {
    const n = fds();
    return n <= fdsBefore + 8 ? n : undefined;
  }, `descriptors to settle (before: ${fdsBefore}, now: ${fds()})`, 5_000);
  console.log(`# 1,000 mixed requests in ${Math.round(elapsed)} ms; descriptors ${fdsBefore} before, ${fdsAfter} after`);
});

/** A request the client gives up on: before any response, or after the first body bytes. */
function aborted(c: Call, when: 'before-response' | 'mid-body'): Promise<void> {
  const scheme = c.scheme ?? 'https';
  return new Promise((resolve) => {
    const req = (scheme === 'https' ? https : http).request({
      host: '127.0.0.1',
      port: scheme === 'https' ? proxy.httpsPort : proxy.httpPort,
      path: c.path,
      headers: { host: `${c.host}:${scheme === 'https' ? HTTPS_PORT : HTTP_PORT}` },
      agent: false,
      ...(scheme === 'https' ? { ca: proxy.caPem, servername: c.host } : {}),
    }, (res) => {
      res.once('data', () => { req.destroy(); resolve(); });
    });
    req.on('error', () => resolve()); // the abort itself surfaces here
    req.end();
    if (when === 'before-response') setTimeout(() => { req.destroy(); resolve(); }, 30);
  });
}

function headerMap(raw: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) out[raw[i].toLowerCase()] = raw[i + 1];
  return out;
}

async function captureClientHello(servername: string): Promise<Buffer> {
  const server = net.createServer();
  const port = await listen(server);
  const got = new Promise<Buffer>((resolve) => server.once('connection', (s) => s.once('data', (b: Buffer) => { resolve(b); s.destroy(); })));
  const client = tls.connect({ host: '127.0.0.1', port, servername });
  client.on('error', () => { /* the capturing server hangs up on purpose */ });
  try {
    return await got;
  } finally {
    client.destroy();
    server.close();
  }
}
