/**
 * Data-plane proxy overhead: the same upstream port measured directly and through the proxy,
 * on keep-alive connections, in one run, as ratios.
 *
 *   node --import tsx bench/proxy.ts [--target host:port --sandbox-id ID --master URL] [--proxy URL]
 *        [--path /] [--samples 4000] [--connections 32] [--seconds 4] [--resume-rounds 20]
 *
 * Default: starts its own loopback upstream and proxy (child processes) and a fake master plus
 * one lifecycle replica (here). With --target/--sandbox-id/--master it measures a real sandbox
 * port instead (a proxy is started against that master unless --proxy names a running one).
 * Prints a table and writes bench/results/proxy.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { connect } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemoryCoordination, silentLogger } from '@svc/common';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { KeepAliveConn } from './lib/http1-client.ts';
import { readFlags } from './lib/args.ts';
import { startChildRole } from './lib/child-role.ts';
import { benchWorkerEntry } from './lib/worker-entry.ts';

const thisFile = fileURLToPath(import.meta.url);
const GOALS = { addedP50Ms: 0.5, throughputRatio: 0.7 };

// ---------------------------------------------------------------------------------------------
// Command line

interface Args {
  target?: string; sandboxId?: string; master?: string; proxy?: string; path: string;
  samples: number; connections: number; seconds: number; resumeRounds: number;
}

function parseArgs(argv: string[]): Args & { mode?: string; rest: Record<string, string> } {
  const { mode, rest, num } = readFlags(argv, ['upstream', 'proxy']);
  return {
    mode, rest,
    target: rest.target, sandboxId: rest['sandbox-id'], master: rest.master, proxy: rest.proxy, path: rest.path ?? '/',
    samples: num('samples', 4000), connections: num('connections', 32), seconds: num('seconds', 4), resumeRounds: num('resume-rounds', 20),
  };
}

// ---------------------------------------------------------------------------------------------
// Child roles

async function serveUpstream() {
  const body = Buffer.from('{"ok":true}');
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`READY ${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
  });
}

async function serveProxy(rest: Record<string, string>) {
  const { startProxy } = await import('@svc/proxy');
  const { proxyWorkerSourceEntry } = await import('@svc/proxy/worker');
  // SVC_PROXY_WORKERS=N (N > 0): the data path in N worker processes, as `svc proxy` runs it (the
  // built bundle when there is one: bench/lib/worker-entry.ts).
  const workers = Number(process.env.SVC_PROXY_WORKERS ?? 0);
  const proxy = await startProxy(
    { proxy: { http_port: 0, https_port: 0, admin_port: 0, bind: '127.0.0.1', admin_token: '', tls_cert_file: '', tls_key_file: '', workers: 0, worker_priority: 0, worker_user: '' } },
    {
      logger: silentLogger(),
      master: new MasterInternalClient(rest.master),
      lifecycleUrls: rest.lifecycle ? rest.lifecycle.split(',') : [],
      coordination: new MemoryCoordination(),
      ...(workers > 0 && {
        workers: { count: workers, entry: benchWorkerEntry(proxyWorkerSourceEntry()) },
      }),
    },
  );
  process.stdout.write(`READY ${JSON.stringify({ httpUrl: proxy.httpUrl, adminUrl: proxy.adminUrl, pids: proxy.pids?.() })}\n`);
}


interface Endpoint { name: string; host: string; port: number; request: Buffer }

export function endpoint(name: string, url: string, path: string, headers: Record<string, string>): Endpoint {
  const u = new URL(url);
  let text = `GET ${path} HTTP/1.1\r\n`;
  for (const [k, v] of Object.entries(headers)) text += `${k}: ${v}\r\n`;
  return { name, host: u.hostname, port: Number(u.port), request: Buffer.from(`${text}\r\n`) };
}

export async function latencySamples(ep: Endpoint, n: number): Promise<number[]> {
  const conn = new KeepAliveConn(() => connect({ host: ep.host, port: ep.port, noDelay: true }), 'connect', ep.request);
  await conn.ready;
  const out: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const status = await conn.send();
    out[i] = Number(process.hrtime.bigint() - t0) / 1e6;
    if (status >= 400) throw new Error(`${ep.name}: HTTP ${status}`);
  }
  conn.close();
  return out;
}

export async function throughput(ep: Endpoint, connections: number, seconds: number): Promise<{ rps: number; requests: number }> {
  const conns = Array.from({ length: connections }, () => new KeepAliveConn(() => connect({ host: ep.host, port: ep.port, noDelay: true }), 'connect', ep.request));
  await Promise.all(conns.map((c) => c.ready));
  let done = 0;
  const until = Date.now() + seconds * 1000;
  const started = process.hrtime.bigint();
  await Promise.all(conns.map(async (c) => {
    while (Date.now() < until) {
      const status = await c.send();
      if (status >= 400) throw new Error(`${ep.name}: HTTP ${status}`);
      done++;
    }
  }));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  for (const c of conns) c.close();
  return { rps: done / secs, requests: done };
}

/** CPU time (user + system) a process has used, in ms, from /proc (Linux). */
export function cpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, in clock ticks of 1/100 s
  } catch {
    return undefined;
  }
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// ---------------------------------------------------------------------------------------------
// Auto-resume latency: time from a request to a paused sandbox until its response.

export interface AutoResumeOptions {
  /** Data-plane base URL of the proxy. */
  proxyUrl: string;
  sandboxId: string;
  /** Sandbox port to request (default: the sandbox's envd port). */
  port?: number;
  path?: string;
  /** Extra headers, e.g. the traffic access token or envd's X-Access-Token. */
  headers?: Record<string, string>;
  rounds: number;
  /** Brings the sandbox to `paused` (and waits until it is) before each round. */
  pause: () => Promise<void>;
}

export async function measureAutoResume(o: AutoResumeOptions): Promise<{ samplesMs: number[]; p50Ms: number; p99Ms: number; maxMs: number }> {
  const samples: number[] = [];
  const u = new URL(o.proxyUrl);
  for (let i = 0; i < o.rounds; i++) {
    await o.pause();
    const t0 = process.hrtime.bigint();
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({
        host: u.hostname, port: u.port, path: o.path ?? '/', agent: false,
        headers: { 'E2b-Sandbox-Id': o.sandboxId, ...(o.port ? { 'E2b-Sandbox-Port': String(o.port) } : {}), ...o.headers },
      }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode!)); });
      req.on('error', reject);
      req.end();
    });
    if (status >= 400) throw new Error(`auto-resume round ${i}: HTTP ${status}`);
    samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const sorted = [...samples].sort((a, b) => a - b);
  return { samplesMs: samples, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), maxMs: sorted[sorted.length - 1] };
}

// ---------------------------------------------------------------------------------------------
// The run

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.mode) process.once('SIGTERM', () => process.exit(0));
  if (args.mode === 'upstream') return serveUpstream();
  if (args.mode === 'proxy') return serveProxy(args.rest);

  const children: ChildProcess[] = [];
  const stops: Array<() => Promise<void>> = [];
  try {
    let targetUrl: string;
    let sandboxId: string;
    let masterUrl: string;
    let fake: import('../packages/proxy/src/testing/fake-master.ts').FakeMaster | undefined;
    let lifecycleUrl = '';
    let upstreamPid: number | undefined;
    let proxyPid: number | undefined;
    const ownSetup = !args.target;

    if (ownSetup) {
      const up = await startChild<{ port: number }>(['--serve-upstream']);
      children.push(up.child);
      upstreamPid = up.child.pid;
      targetUrl = `http://127.0.0.1:${up.info.port}`;
      sandboxId = 'benchsbx';
      const { FakeMaster } = await import('../packages/proxy/src/testing/fake-master.ts');
      fake = new FakeMaster();
      masterUrl = await fake.start();
      fake.add({ sandboxId, envdPort: up.info.port, autoResume: true });
      stops.push(() => fake!.close());
      const { startLifecycle } = await import('@svc/lifecycle');
      const coordination = new MemoryCoordination();
      const lc = await startLifecycle(
        { lifecycle: { replicas: 1, listen: '127.0.0.1:0', sweep_interval_ms: 60_000, warmup_sec: 3600, lease_ttl_ms: 5_000 } },
        { logger: silentLogger(), master: new MasterInternalClient(masterUrl), coordination, replicaIndex: 0 },
      );
      lifecycleUrl = lc.url;
      stops.push(() => lc.close());
    } else {
      if (!args.sandboxId || (!args.master && !args.proxy)) throw new Error('--target needs --sandbox-id and --master (or --proxy)');
      targetUrl = `http://${args.target}`;
      sandboxId = args.sandboxId;
      masterUrl = args.master ?? '';
    }

    let proxyUrl = args.proxy;
    let adminUrl: string | undefined;
    if (!proxyUrl) {
      const px = await startChild<{ httpUrl: string; adminUrl: string }>(['--serve-proxy', '--master', masterUrl, '--lifecycle', lifecycleUrl]);
      children.push(px.child);
      proxyPid = px.child.pid;
      proxyUrl = px.info.httpUrl;
      adminUrl = px.info.adminUrl;
    }

    const targetPort = new URL(targetUrl).port;
    const direct = endpoint('direct', targetUrl, args.path, { Host: new URL(targetUrl).host });
    const viaProxy = endpoint('proxy', proxyUrl, args.path, {
      Host: `${targetPort}-${sandboxId}.bench.local`, 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': targetPort,
    });

    // Warm both paths (JIT, keep-alive pools, route cache).
    await latencySamples(direct, 1000);
    await latencySamples(viaProxy, 1000);

    const lat = { direct: [] as number[], proxy: [] as number[] };
    const rounds = 4;
    for (let r = 0; r < rounds; r++) {
      lat.direct.push(...await latencySamples(direct, Math.ceil(args.samples / rounds)));
      lat.proxy.push(...await latencySamples(viaProxy, Math.ceil(args.samples / rounds)));
    }
    // CPU per request of our own child processes: a measure of the proxy's cost that does not
    // depend on what else the machine is running (wall-clock ratios do).
    const cpu = { proxyMs: 0, proxyRequests: 0, upstreamMs: 0, upstreamRequests: 0 };
    const rps = { direct: [] as number[], proxy: [] as number[] };
    for (let r = 0; r < 2; r++) {
      const u0 = cpuMs(upstreamPid);
      const dr = await throughput(direct, args.connections, args.seconds / 2);
      const u1 = cpuMs(upstreamPid);
      rps.direct.push(dr.rps);
      if (u0 !== undefined && u1 !== undefined) { cpu.upstreamMs += u1 - u0; cpu.upstreamRequests += dr.requests; }
      const p0 = cpuMs(proxyPid);
      const pr = await throughput(viaProxy, args.connections, args.seconds / 2);
      const p1 = cpuMs(proxyPid);
      rps.proxy.push(pr.rps);
      if (p0 !== undefined && p1 !== undefined) { cpu.proxyMs += p1 - p0; cpu.proxyRequests += pr.requests; }
    }
    const cpuPerRequestUs = {
      proxy: cpu.proxyRequests ? (cpu.proxyMs * 1000) / cpu.proxyRequests : undefined,
      upstream: cpu.upstreamRequests ? (cpu.upstreamMs * 1000) / cpu.upstreamRequests : undefined,
    };

    const stats = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return { p50: percentile(s, 50), p99: percentile(s, 99) }; };
    const d = stats(lat.direct);
    const p = stats(lat.proxy);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const directRps = mean(rps.direct);
    const proxyRps = mean(rps.proxy);

    let autoResume: Awaited<ReturnType<typeof measureAutoResume>> | undefined;
    if (fake && adminUrl && args.resumeRounds > 0) {
      const { ProxyAdminClient } = await import('@svc/contracts/proxy-admin');
      const admin = new ProxyAdminClient(adminUrl, '');
      autoResume = await measureAutoResume({
        proxyUrl, sandboxId, port: Number(targetPort), path: args.path, rounds: args.resumeRounds,
        // What the lifecycle manager does on an idle pause: the master pauses, proxies are purged.
        pause: async () => { fake!.set(sandboxId, { state: 'paused' }); await admin.purge([sandboxId]); },
      });
    }

    const result = {
      bench: 'proxy',
      at: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      setup: ownSetup ? 'own loopback upstream, proxy child process, fake master' : `target ${args.target} via ${args.proxy ? 'running proxy' : 'proxy started here'}`,
      params: { path: args.path, samples: args.samples, connections: args.connections, seconds: args.seconds },
      latencyMs: {
        direct: d, proxy: p,
        addedP50: p.p50 - d.p50, addedP99: p.p99 - d.p99,
        ratioP50: p.p50 / d.p50, ratioP99: p.p99 / d.p99,
      },
      throughputRps: { direct: directRps, proxy: proxyRps, ratio: proxyRps / directRps, rounds: rps },
      cpuPerRequestUs,
      /** Requests a second one core could proxy at that CPU cost: the proxy's own limit. */
      proxyCapacityPerCoreRps: cpuPerRequestUs.proxy ? 1e6 / cpuPerRequestUs.proxy : undefined,
      loadAverage: loadavg(),
      autoResumeMs: autoResume ? { p50: autoResume.p50Ms, p99: autoResume.p99Ms, max: autoResume.maxMs, rounds: autoResume.samplesMs.length, note: 'fake master with an instant resume: proxy + lifecycle + master round trips only' } : undefined,
      goals: {
        addedP50Ms: GOALS.addedP50Ms, throughputRatio: GOALS.throughputRatio,
        met: p.p50 - d.p50 <= GOALS.addedP50Ms && proxyRps / directRps >= GOALS.throughputRatio,
      },
    };

    printTable(result);
    const out = join(dirname(thisFile), 'results', 'proxy.json');
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify(result, null, 2) + '\n');
    console.log(`\nwrote ${out}`);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    for (const s of stops.reverse()) await s().catch((err: Error) => console.error(`proxy bench: a shutdown step failed: ${err.message}`));
  }
}

function printTable(r: {
  latencyMs: { direct: { p50: number; p99: number }; proxy: { p50: number; p99: number }; addedP50: number; addedP99: number; ratioP50: number; ratioP99: number };
  throughputRps: { direct: number; proxy: number; ratio: number };
  cpuPerRequestUs: { proxy?: number; upstream?: number };
  loadAverage: number[];
  autoResumeMs?: { p50: number; p99: number; max: number };
  goals: { met: boolean };
}) {
  const f = (n: number, d = 3) => n.toFixed(d);
  const rows: string[][] = [
    ['metric', 'direct', 'proxy', 'added / ratio', 'goal'],
    ['latency p50 (ms)', f(r.latencyMs.direct.p50), f(r.latencyMs.proxy.p50), `+${f(r.latencyMs.addedP50)}  (x${f(r.latencyMs.ratioP50, 2)})`, `<= +${GOALS.addedP50Ms}`],
    ['latency p99 (ms)', f(r.latencyMs.direct.p99), f(r.latencyMs.proxy.p99), `+${f(r.latencyMs.addedP99)}  (x${f(r.latencyMs.ratioP99, 2)})`, ''],
    ['requests/s', f(r.throughputRps.direct, 0), f(r.throughputRps.proxy, 0), `${f(r.throughputRps.ratio * 100, 1)}%`, `>= ${GOALS.throughputRatio * 100}%`],
  ];
  if (r.cpuPerRequestUs.proxy !== undefined) {
    rows.push(['CPU us/request', r.cpuPerRequestUs.upstream === undefined ? '' : `${f(r.cpuPerRequestUs.upstream, 1)} (upstream)`, f(r.cpuPerRequestUs.proxy, 1),
      `${f(1e6 / r.cpuPerRequestUs.proxy, 0)} req/s per core`, '']);
  }
  if (r.autoResumeMs) rows.push(['auto-resume (ms)', '', `p50 ${f(r.autoResumeMs.p50, 1)}`, `p99 ${f(r.autoResumeMs.p99, 1)}`, '']);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const [i, row] of rows.entries()) {
    console.log(row.map((c, j) => c.padEnd(widths[j])).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
  console.log(`goals met: ${r.goals.met ? 'yes' : 'no'}   (load average during the run: ${r.loadAverage.map((x) => x.toFixed(1)).join(' ')})`);
}

if (process.argv[1] === thisFile) {
  main().then(
    () => { if (!parseArgs(process.argv.slice(2)).mode) process.exit(0); },
    (err) => { console.error(err); process.exit(1); },
  );
}

/** SVC_BENCH_CPU_PROF=<dir> writes a CPU profile of each child (on SIGTERM) into <dir>. */
function startChild<T>(args: string[]): Promise<{ child: ChildProcess; info: T }> {
  return startChildRole<T>(thisFile, args, process.env.SVC_BENCH_CPU_PROF ? { cpuProfDir: process.env.SVC_BENCH_CPU_PROF } : {});
}
