/**
 * Egress proxy overhead (@svc/egress): the same loopback upstream reached directly and through
 * the transparent proxy, in one run, as ratios against the direct path (the floor is the bare
 * upstream, never our own component).
 *
 *   node --import tsx bench/egress.ts [--seconds 6] [--connections 16] [--samples 2000]
 *        [--only https-keepalive,https-new,http-keepalive]
 *
 * Three processes: this one is the load generator, the upstream and the proxy are child
 * processes, so no two roles share an event loop (on a 2-core machine they still share the
 * cores: the proxied path runs three busy processes where the direct path runs two).
 *   1. HTTPS keep-alive: requests/s over --seconds with --connections keep-alive connections,
 *      and latency p50/p99 of --samples single requests on one connection;
 *   2. HTTPS new connections: every request on a fresh TLS connection (full handshake, no
 *      session resumption; the proxy's upstream side keeps its pool, as designed);
 *   3. plain HTTP keep-alive requests/s.
 * The client is a lean hand-written HTTP/1.1 loop on tls.connect / net.connect; a short
 * calibration against node's https.Agent says which is faster. CPU time per request of each
 * process (from /proc) is recorded beside the wall-clock figures.
 *
 * Prints a table and writes bench/results/egress.json (not with --only).
 * SVC_BENCH_CPU_PROF=<dir> writes a CPU profile of the proxy child into <dir>.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import tls from 'node:tls';
import { silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressCa, startEgressProxy } from '@svc/egress';
import { stat, type Stat, writeResult } from './lib/stats.ts';
import { KeepAliveConn, parseResponse } from './lib/http1-client.ts';
import { cpuMs } from './proxy.ts';
import { readFlags } from './lib/args.ts';
import { startChildRole } from './lib/child-role.ts';

const thisFile = fileURLToPath(import.meta.url);
export const HOST = 'api.example.test';
const GOALS = {
  /** HTTPS keep-alive requests/s through the proxy, as a share of direct. */
  httpsKeepAliveThroughputRatio: 0.5,
  /** HTTPS keep-alive latency added at p50 (ms). */
  httpsAddedP50Ms: 2,
  /** New HTTPS connections (one request each) per second through the proxy: 20x mitmproxy's ~50. */
  httpsNewConnectionsPerSec: 1000,
};
const PHASES = ['https-keepalive', 'https-new', 'http-keepalive'] as const;
type Phase = (typeof PHASES)[number];

// ---------------------------------------------------------------------------------------------
// Command line

interface Args { mode?: string; rest: Record<string, string>; seconds: number; connections: number; samples: number; only?: Phase[] }

function parseArgs(argv: string[]): Args {
  const { mode, rest, num } = readFlags(argv, ['upstream', 'proxy']);
  const only = rest.only ? rest.only.split(',').map((p) => p.trim()) : undefined;
  for (const p of only ?? []) if (!(PHASES as readonly string[]).includes(p)) throw new Error(`--only: unknown phase ${p} (${PHASES.join(', ')})`);
  return { mode, rest, seconds: num('seconds', 6), connections: num('connections', 16), samples: num('samples', 2000), only: only as Phase[] | undefined };
}

// ---------------------------------------------------------------------------------------------
// Child roles

/** The upstream: HTTPS (a leaf for api.example.test from the test CA) and HTTP, a small JSON body. */
async function serveUpstream(rest: Record<string, string>) {
  const ca = await EgressCa.loadOrCreate(rest['ca-dir']);
  const leaf = ca.leafFor(HOST);
  const body = Buffer.from('{"ok":true,"from":"upstream"}');
  const handler: http.RequestListener = (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
  const httpsServer = https.createServer({ cert: leaf.cert, key: leaf.key, keepAliveTimeout: 60_000 }, handler);
  const httpServer = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const listen = (s: net.Server) => new Promise<number>((resolve) => s.listen(0, '127.0.0.1', 511, () => resolve((s.address() as net.AddressInfo).port)));
  const [httpsPort, httpPort] = await Promise.all([listen(httpsServer), listen(httpServer)]);
  process.stdout.write(`READY ${JSON.stringify({ httpsPort, httpPort })}\n`);
}

/** The egress proxy as svc runs it, bound to 127.0.0.1, the upstream name resolved to loopback. */
async function serveProxy(rest: Record<string, string>) {
  const upstreamCa = await EgressCa.loadOrCreate(rest['upstream-ca-dir']);
  const proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0,
    adminToken: rest['admin-token'],
    caDir: rest['ca-dir'],
    auditLogPath: rest['audit-log'],
    resolve: { [HOST]: '127.0.0.1' },
    upstreamCa: upstreamCa.caPem,
    logger: silentLogger(),
  });
  process.stdout.write(`READY ${JSON.stringify({ httpPort: proxy.httpPort, httpsPort: proxy.httpsPort, adminPort: proxy.adminPort, caPem: proxy.caPem })}\n`);
}


export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); resolve(); }, 10_000);
    child.once('exit', () => { clearTimeout(timer); resolve(); });
    child.kill('SIGTERM');
  });
}

// ---------------------------------------------------------------------------------------------
// The load generator: a lean HTTP/1.1 client on raw sockets, the same code for both paths.

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

interface Rate { rps: number; requests: number; seconds: number; errors: number; cpuUsPerRequest: Record<string, number | undefined> }

/** CPU time per request of the client (this process) and of each child, over `fn`. */
export async function withCpu(pids: Record<string, number | undefined>, fn: () => Promise<{ requests: number; seconds: number; errors: number }>): Promise<Rate> {
  const c0 = process.cpuUsage();
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMs(pid)]));
  const r = await fn();
  const c1 = process.cpuUsage(c0);
  const cpuUsPerRequest: Record<string, number | undefined> = { client: (c1.user + c1.system) / r.requests };
  for (const [k, pid] of Object.entries(pids)) {
    const a = before[k];
    const b = cpuMs(pid);
    cpuUsPerRequest[k] = a === undefined || b === undefined ? undefined : ((b - a) * 1000) / r.requests;
  }
  return { rps: r.requests / r.seconds, ...r, cpuUsPerRequest };
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
async function nodeAgentRate(t: Target, connections: number, seconds: number) {
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

/** Alternates direct and proxy in `rounds` rounds, so that drift on the machine touches both alike. */
async function paired(rounds: number, direct: () => Promise<Rate>, proxy: () => Promise<Rate>) {
  const d: Rate[] = [];
  const p: Rate[] = [];
  for (let r = 0; r < rounds; r++) { d.push(await direct()); p.push(await proxy()); }
  return { direct: merge(d), proxy: merge(p) };
}

function merge(rs: Rate[]) {
  const requests = rs.reduce((a, r) => a + r.requests, 0);
  const seconds = rs.reduce((a, r) => a + r.seconds, 0);
  const keys = Object.keys(rs[0].cpuUsPerRequest);
  const cpu: Record<string, number | undefined> = {};
  for (const k of keys) {
    const vals = rs.map((r) => r.cpuUsPerRequest[k]);
    cpu[k] = vals.some((v) => v === undefined) ? undefined : round(rs.reduce((a, r) => a + (r.cpuUsPerRequest[k] as number) * r.requests, 0) / requests, 1);
  }
  return { rps: round(requests / seconds, 0), requests, seconds: round(seconds, 2), errors: rs.reduce((a, r) => a + r.errors, 0), rounds: rs.map((r) => round(r.rps, 0)), cpuUsPerRequest: cpu };
}

const round = (v: number, d = 2) => Math.round(v * 10 ** d) / 10 ** d;

// ---------------------------------------------------------------------------------------------
// The run

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.mode) {
    process.once('SIGTERM', () => process.exit(0));
    return args.mode === 'upstream' ? serveUpstream(args.rest) : serveProxy(args.rest);
  }
  const phases = new Set<Phase>(args.only ?? PHASES);
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-egress-'));
  const children: ChildProcess[] = [];
  const loadStart = loadavg();
  try {
    // The upstream's CA is made here first, so that the upstream child only loads it.
    const upstreamCaDir = join(dir, 'upstream-ca');
    const upstreamCa = await EgressCa.loadOrCreate(upstreamCaDir);
    const adminToken = randomBytes(16).toString('hex');
    const auditLog = join(dir, 'audit', 'access.jsonl');

    const up = await startChild<{ httpsPort: number; httpPort: number }>(['--serve-upstream', '--ca-dir', upstreamCaDir]);
    children.push(up.child);
    const px = await startChild<{ httpPort: number; httpsPort: number; adminPort: number; caPem: string }>(
      ['--serve-proxy', '--ca-dir', join(dir, 'proxy-ca'), '--upstream-ca-dir', upstreamCaDir, '--admin-token', adminToken, '--audit-log', auditLog],
      process.env.SVC_BENCH_CPU_PROF,
    );
    children.push(px.child);
    console.log(`upstream pid ${up.child.pid}, egress proxy pid ${px.child.pid} (for perf record -g -p PID)`);

    // The sandbox is this process: its source address 127.0.0.1 is the policy's address.
    const policy: SandboxEgressPolicy = {
      sandboxId: 'benchsbx',
      address: '127.0.0.1',
      rules: [
        { name: 'bench-https', match: { host: HOST, scheme: 'https', port: up.info.httpsPort }, action: { allow: true } },
        { name: 'bench-http', match: { host: HOST, scheme: 'http', port: up.info.httpPort }, action: { allow: true } },
      ],
    };
    const put = await fetch(`http://127.0.0.1:${px.info.adminPort}/admin/policies/${policy.sandboxId}`, {
      method: 'PUT', headers: { 'content-type': 'application/json', [EGRESS_ADMIN_TOKEN_HEADER]: adminToken }, body: JSON.stringify(policy),
    });
    if (!put.ok) throw new Error(`PUT policy: HTTP ${put.status} ${await put.text()}`);

    const t = {
      httpsDirect: target('HTTPS direct', 'https', up.info.httpsPort, up.info.httpsPort, upstreamCa.caPem),
      httpsProxy: target('HTTPS via egress proxy', 'https', px.info.httpsPort, up.info.httpsPort, px.info.caPem),
      httpDirect: target('HTTP direct', 'http', up.info.httpPort, up.info.httpPort),
      httpProxy: target('HTTP via egress proxy', 'http', px.info.httpPort, up.info.httpPort),
    };
    const pidsDirect = { upstream: up.child.pid };
    const pidsProxy = { proxy: px.child.pid, upstream: up.child.pid };
    const N = args.connections;
    const half = args.seconds / 2;

    // Warm both paths: JIT, the proxy's leaf context and its upstream pool.
    for (const x of Object.values(t)) {
      await keepAliveLatency(x, 500);
      await keepAliveRate(x, N, 0.5);
    }
    await newConnectionLatency(t.httpsDirect, 100);
    await newConnectionLatency(t.httpsProxy, 100);

    const result: Record<string, unknown> = {
      bench: 'egress',
      at: new Date().toISOString(),
      params: { seconds: args.seconds, connections: N, samples: args.samples, phases: [...phases] },
      setup: 'load generator here, upstream and egress proxy in child processes, all on 127.0.0.1; HTTPS via the proxy: client → proxy TLS (leaf from the proxy CA, SNI api.example.test) → upstream TLS verified against the test CA, kept alive in the proxy\'s pool; audit log on (metadata)',
    };

    // Which load generator: the hand-written client against node's https.Agent, on the direct path.
    const calSecs = Math.min(2, half);
    const calibration = {
      handWrittenRps: round((await withCpu(pidsDirect, () => keepAliveRate(t.httpsDirect, N, calSecs))).rps, 0),
      nodeHttpsAgentRps: round((await withCpu(pidsDirect, () => nodeAgentRate(t.httpsDirect, N, calSecs))).rps, 0),
    };
    result.loadGenerator = { ...calibration, used: 'hand-written HTTP/1.1 loop on tls.connect / net.connect' };

    let httpsKa: ReturnType<typeof summarize> | undefined;
    let httpsNew: ReturnType<typeof summarize> | undefined;
    let httpKa: ReturnType<typeof summarize> | undefined;
    /** Latency in two interleaved halves, then the paired rate, direct against through the proxy. */
    const measureHttps = async (latency: (x: Target, n: number) => Promise<number[]>, rateOf: typeof keepAliveRate) => {
      const lat = { direct: [] as number[], proxy: [] as number[] };
      for (let r = 0; r < 2; r++) {
        lat.direct.push(...await latency(t.httpsDirect, Math.ceil(args.samples / 2)));
        lat.proxy.push(...await latency(t.httpsProxy, Math.ceil(args.samples / 2)));
      }
      const rate = await paired(2, () => withCpu(pidsDirect, () => rateOf(t.httpsDirect, N, half)), () => withCpu(pidsProxy, () => rateOf(t.httpsProxy, N, half)));
      return summarize(rate, lat);
    };
    if (phases.has('https-keepalive')) {
      httpsKa = await measureHttps(keepAliveLatency, keepAliveRate);
      result.httpsKeepAlive = httpsKa;
    }
    if (phases.has('https-new')) {
      httpsNew = await measureHttps(newConnectionLatency, newConnectionRate);
      result.httpsNewConnections = httpsNew;
    }
    if (phases.has('http-keepalive')) {
      const rate = await paired(2, () => withCpu(pidsDirect, () => keepAliveRate(t.httpDirect, N, half / 2)), () => withCpu(pidsProxy, () => keepAliveRate(t.httpProxy, N, half / 2)));
      httpKa = summarize(rate);
      result.httpKeepAlive = httpKa;
    }

    const met = {
      httpsKeepAliveThroughputRatio: httpsKa ? httpsKa.throughputRatio >= GOALS.httpsKeepAliveThroughputRatio : undefined,
      httpsAddedP50Ms: httpsKa?.addedP50Ms !== undefined ? httpsKa.addedP50Ms <= GOALS.httpsAddedP50Ms : undefined,
      httpsNewConnectionsPerSec: httpsNew ? httpsNew.proxy.rps >= GOALS.httpsNewConnectionsPerSec : undefined,
    };
    result.goals = { ...GOALS, met, allMet: Object.values(met).every((v) => v !== false) };
    result.auditLogBytes = fileSize(auditLog);
    result.machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, loadavgStart: loadStart.map((x) => round(x)), loadavgEnd: loadavg().map((x) => round(x)) };

    printReport(result, calibration, httpsKa, httpsNew, httpKa, met);
    if (args.only) console.log('\n--only: bench/results/egress.json left as it was');
    else console.log(`\nwrote ${writeResult('egress', result)}`);
  } finally {
    await Promise.all(children.map(stopChild));
    rmSync(dir, { recursive: true, force: true });
  }
}

function summarize(rate: Awaited<ReturnType<typeof paired>>, lat?: { direct: number[]; proxy: number[] }) {
  const d: Stat | undefined = lat ? stat(lat.direct) : undefined;
  const p: Stat | undefined = lat ? stat(lat.proxy) : undefined;
  return {
    direct: { ...rate.direct, ...(d ? { latencyMs: d } : {}) },
    proxy: { ...rate.proxy, ...(p ? { latencyMs: p } : {}) },
    throughputRatio: round(rate.proxy.rps / rate.direct.rps, 3),
    /**
     * Requests a second the busiest server process could serve with a core of its own, from its
     * CPU time per request (the upstream on the direct path, the proxy on the other): its own
     * limit, apart from the client and the shared cores.
     */
    capacityPerCoreRps: {
      direct: perCore(rate.direct.cpuUsPerRequest.upstream),
      proxy: perCore(rate.proxy.cpuUsPerRequest.proxy),
    },
    ...(d && p ? { addedP50Ms: round(p.p50 - d.p50), addedP99Ms: round(p.p99 - d.p99) } : {}),
  };
}

const perCore = (us: number | undefined) => (us ? round(1e6 / us, 0) : undefined);

function fileSize(path: string): number | undefined {
  try { return statSync(path).size; } catch { return undefined; }
}

function printReport(
  r: Record<string, unknown>,
  cal: { handWrittenRps: number; nodeHttpsAgentRps: number },
  ka: ReturnType<typeof summarize> | undefined,
  nc: ReturnType<typeof summarize> | undefined,
  hk: ReturnType<typeof summarize> | undefined,
  met: Record<string, boolean | undefined>,
) {
  const m = r.machine as { cpus: number; loadavgStart: number[]; loadavgEnd: number[] };
  const pf = (ok: boolean | undefined) => (ok === undefined ? '' : ok ? 'pass' : 'FAIL');
  // Per process: CPU per request, and in brackets the share of one core it used (the busiest one is the bound).
  const cpu = (x: { rps: number; cpuUsPerRequest: Record<string, number | undefined> }) =>
    Object.entries(x.cpuUsPerRequest).map(([k, v]) => `${k} ${v ?? '?'}${v === undefined ? '' : ` (${Math.round((v * x.rps) / 1e4)}%)`}`).join(', ');
  const rows: string[][] = [['measure', 'direct', 'via proxy', 'ratio / added', 'goal', '']];
  if (ka?.direct.latencyMs && ka.proxy.latencyMs) {
    rows.push(['HTTPS keep-alive, requests/s', String(ka.direct.rps), String(ka.proxy.rps), `${round(ka.throughputRatio * 100, 1)}%`, `>= ${GOALS.httpsKeepAliveThroughputRatio * 100}%`, pf(met.httpsKeepAliveThroughputRatio)]);
    rows.push(['HTTPS keep-alive, latency p50 (ms)', String(ka.direct.latencyMs.p50), String(ka.proxy.latencyMs.p50), `+${ka.addedP50Ms}`, `<= +${GOALS.httpsAddedP50Ms}`, pf(met.httpsAddedP50Ms)]);
    rows.push(['HTTPS keep-alive, latency p99 (ms)', String(ka.direct.latencyMs.p99), String(ka.proxy.latencyMs.p99), `+${ka.addedP99Ms}`, '', '']);
  }
  if (nc?.direct.latencyMs && nc.proxy.latencyMs) {
    rows.push(['HTTPS new connection each, requests/s', String(nc.direct.rps), String(nc.proxy.rps), `${round(nc.throughputRatio * 100, 1)}%`, `>= ${GOALS.httpsNewConnectionsPerSec} via proxy`, pf(met.httpsNewConnectionsPerSec)]);
    rows.push(['HTTPS new connection, latency p50 (ms)', String(nc.direct.latencyMs.p50), String(nc.proxy.latencyMs.p50), `+${nc.addedP50Ms}`, '', '']);
    rows.push(['HTTPS new connection, latency p99 (ms)', String(nc.direct.latencyMs.p99), String(nc.proxy.latencyMs.p99), `+${nc.addedP99Ms}`, '', '']);
  }
  if (hk) rows.push(['HTTP keep-alive, requests/s', String(hk.direct.rps), String(hk.proxy.rps), `${round(hk.throughputRatio * 100, 1)}%`, '', '']);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  console.log(`\negress proxy against direct, ${(r.params as { connections: number }).connections} connections for the rates; ${m.cpus} cores shared by client, proxy and upstream (three processes)`);
  for (const [i, row] of rows.entries()) {
    console.log(row.map((c, j) => c.padEnd(widths[j])).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
  console.log('\nCPU per request (us) by process, (share of one core it used):');
  for (const [name, x] of [['HTTPS keep-alive', ka], ['HTTPS new connections', nc], ['HTTP keep-alive', hk]] as const) {
    if (x) {
      console.log(`  ${name.padEnd(22)} direct: ${cpu(x.direct)}   via proxy: ${cpu(x.proxy)}`
        + `   -> one core of its own: upstream ${x.capacityPerCoreRps.direct ?? '?'} req/s, proxy ${x.capacityPerCoreRps.proxy ?? '?'} req/s`);
    }
  }
  console.log(`\nload generator: hand-written client ${cal.handWrittenRps} req/s, node https.Agent ${cal.nodeHttpsAgentRps} req/s (HTTPS keep-alive, direct); the hand-written one is used`);
  console.log(`goals met: ${(r.goals as { allMet: boolean }).allMet ? 'yes' : 'no'}   (load average: ${m.loadavgStart.join(' ')} at the start, ${m.loadavgEnd.join(' ')} at the end)`);
}

if (process.argv[1] === thisFile) {
  main().then(
    () => { if (!parseArgs(process.argv.slice(2)).mode) process.exit(0); },
    (err) => { console.error(err); process.exit(1); },
  );
}

/** A role of this file as a child process (bench/lib/child-role.ts). */
export function startChild<T>(args: string[], profileDir?: string): Promise<{ child: ChildProcess; info: T }> {
  return startChildRole<T>(thisFile, args, profileDir ? { cpuProfDir: profileDir } : {});
}
