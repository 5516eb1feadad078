/**
 * svc's two proxies against Debian's nginx as the peer, in the same run: the same upstream, the
 * same client, the same number of workers (1, then 2), CPU per request from each process tree's
 * own accounting (/proc).
 *
 *   node --import tsx bench/nginx-peer.ts [--seconds 4] [--rounds 2] [--connections 16] [--samples 2000] [--workers 1,2]
 *
 * For each worker count, three phases, each on three paths (direct to the upstream; svc; nginx):
 *   1. data plane: plain HTTP keep-alive routed by E2b-Sandbox-Id / E2b-Sandbox-Port (bench/proxy.ts's
 *      client), svc's data-plane proxy against nginx proxy_pass with an upstream keep-alive pool;
 *   2. HTTPS keep-alive: the egress proxy (as bench/egress.ts runs it, audit log on) against nginx as
 *      a TLS-terminating, re-encrypting reverse proxy (its own leaf for the upstream's name, upstream
 *      TLS verified against the upstream's CA, pooled);
 *   3. a new TLS connection per request on the same two.
 * svc's proxies get SVC_PROXY_WORKERS / SVC_EGRESS_WORKERS=N through the configuration; what they
 * really ran (processes in their tree) is recorded beside the figures. Their workers run the built
 * bundle, dist/svc.mjs, as `svc up` does (run `npm run build` first; SVC_BENCH_SOURCES=1 runs the
 * sources under tsx instead: bench/lib/worker-entry.ts). Needs nginx (apt-get install nginx).
 * Prints a table and writes bench/results/nginx-peer.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, MemoryCoordination, silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { EgressCa } from '@svc/egress';
import { startChildRole } from './lib/child-role.ts';
import { readFlags } from './lib/args.ts';
import { benchWorkerEntry, workerCode } from './lib/worker-entry.ts';
import { dataPlaneServer, freePort, nginxVersion, processTree, startNginx, tlsReverseProxyServer, treeCpu, treeCpuDelta } from './lib/nginx.ts';
import { stat, type Stat, writeResult } from './lib/stats.ts';
import { HOST, keepAliveLatency, keepAliveRate, newConnectionLatency, newConnectionRate, startChild, stopChild, target } from './egress.ts';
import { cpuMs, endpoint, latencySamples, throughput } from './proxy.ts';

const thisFile = fileURLToPath(import.meta.url);
const SANDBOX = 'benchsbx';
const GOALS = {
  /** Data plane: requests/s through svc's proxy as a share of nginx's. */
  dataPlaneThroughputOfNginx: 0.9,
  /** Data plane: svc's p50 at most this much above nginx's (ms). */
  dataPlaneP50OverNginxMs: 0.2,
  /** HTTPS keep-alive: requests/s through the egress proxy as a share of direct. */
  egressKeepAliveOfDirect: 0.5,
  /** HTTPS keep-alive: the egress proxy's CPU per request at most this many times nginx's. */
  egressCpuOverNginx: 2,
  /** New TLS connections per second through the egress proxy as a share of nginx's. */
  newTlsOfNginx: 0.8,
};

// ---------------------------------------------------------------------------------------------
// Child roles: svc's proxies with the worker count from the configuration, as `svc proxy` / `svc egress` read it

/** The configuration as the environment sets it (only the workers variable: nothing else of this machine's). */
function configFromEnv(name: string) {
  return loadConfig({ env: process.env[name] === undefined ? {} : { [name]: process.env[name] }, validate: false });
}

async function serveDataPlane(rest: Record<string, string>) {
  const { startProxy } = await import('@svc/proxy');
  const { proxyWorkerSourceEntry } = await import('@svc/proxy/worker');
  const cfg = configFromEnv('SVC_PROXY_WORKERS');
  const n = cfg.proxy.workers;
  const proxy = await startProxy(
    // worker_priority 0: nginx's workers run at the default priority too.
    { proxy: { ...cfg.proxy, http_port: 0, https_port: 0, admin_port: 0, bind: '127.0.0.1', admin_token: '', tls_cert_file: '', tls_key_file: '', worker_priority: 0 } },
    {
      logger: silentLogger(), master: new MasterInternalClient(rest.master), lifecycleUrls: [rest.lifecycle], coordination: new MemoryCoordination(),
      ...(n > 0 ? { workers: { count: n, entry: benchWorkerEntry(proxyWorkerSourceEntry()) } } : {}),
    },
  );
  process.stdout.write(`READY ${JSON.stringify({ httpUrl: proxy.httpUrl })}\n`);
}

async function serveEgress(rest: Record<string, string>) {
  const { startEgressProxy } = await import('@svc/egress');
  const { egressWorkerSourceEntry } = await import('@svc/egress/worker');
  const n = configFromEnv('SVC_EGRESS_WORKERS').egress.workers;
  const policy = JSON.parse(rest.policy) as SandboxEgressPolicy;
  const proxy = await startEgressProxy({
    bind: '127.0.0.1', httpPort: 0, httpsPort: 0, adminBind: '127.0.0.1', adminPort: 0,
    adminToken: rest['admin-token'], caDir: rest['ca-dir'], auditLogPath: rest['audit-log'],
    resolve: { [HOST]: '127.0.0.1' },
    upstreamCa: (await EgressCa.loadOrCreate(rest['upstream-ca-dir'])).caPem,
    // The primary loads it at start, and hands it to its workers.
    policySource: async () => [policy],
    logger: silentLogger(),
    ...(n > 0 ? { workers: { count: n, entry: benchWorkerEntry(egressWorkerSourceEntry()) } } : {}),
  });
  process.stdout.write(`READY ${JSON.stringify({ httpsPort: proxy.httpsPort, adminPort: proxy.adminPort, caPem: proxy.caPem })}\n`);
}


/** SIGTERM to the child, then SIGKILL to whatever of its tree outlived it. */
async function stopTree(child: ChildProcess) {
  const pids = child.pid === undefined ? [] : processTree(child.pid);
  await stopChild(child);
  for (const pid of pids.slice(1)) {
    if (!existsSync(`/proc/${pid}`)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      console.error(`nginx-peer: SIGKILL to ${pid}, left from ${child.pid}, failed: ${(err as Error).message}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Measuring a path: latency (one connection, sequential), then a rate with each process tree's CPU

interface PathDef {
  key: 'direct' | 'svc' | 'nginx';
  /** The proxy's process (its tree is counted); none for direct. */
  server?: number;
  latency: (n: number) => Promise<number[]>;
  rate: (seconds: number) => Promise<{ requests: number; seconds: number }>;
}

interface PathResult {
  rps: number; requests: number; seconds: number; rounds: number[]; latencyMs: Stat;
  /** CPU µs per request: the proxy's whole tree (server), the upstream, the load generator. */
  cpuUsPerRequest: { server?: number; upstream?: number; client: number };
}

const round = (v: number, d = 2) => Math.round(v * 10 ** d) / 10 ** d;

/**
 * Latency in two interleaved rounds, then the rate in `rounds` rounds (the order reversed in every
 * other), so drift touches every path alike; more rounds of the same total time interleave finer.
 */
async function measure(paths: PathDef[], upstreamPid: number | undefined, samples: number, seconds: number, rounds: number): Promise<Record<string, PathResult>> {
  for (const p of paths) { await p.latency(Math.max(50, samples / 4)); await p.rate(0.5); } // warm-up: JIT, pools, leaf contexts
  const lat = new Map<string, number[]>(paths.map((p) => [p.key, []]));
  for (let r = 0; r < 2; r++) for (const p of paths) lat.get(p.key)!.push(...await p.latency(Math.ceil(samples / 2)));
  const acc = new Map(paths.map((p) => [p.key, { requests: 0, seconds: 0, server: 0, upstream: 0, client: 0, rounds: [] as number[] }]));
  for (let r = 0; r < rounds; r++) {
    for (const p of r % 2 === 0 ? paths : [...paths].reverse()) {
      const s0 = treeCpu(p.server);
      const u0 = cpuMs(upstreamPid);
      const c0 = process.cpuUsage();
      const got = await p.rate(seconds / rounds);
      const c1 = process.cpuUsage(c0);
      const a = acc.get(p.key)!;
      a.requests += got.requests;
      a.seconds += got.seconds;
      a.rounds.push(round(got.requests / got.seconds, 0));
      a.server += treeCpuDelta(s0, treeCpu(p.server));
      a.upstream += (cpuMs(upstreamPid) ?? 0) - (u0 ?? 0);
      a.client += (c1.user + c1.system) / 1000;
    }
  }
  const out: Record<string, PathResult> = {};
  for (const p of paths) {
    const a = acc.get(p.key)!;
    const per = (ms: number) => round((ms * 1000) / a.requests, 1);
    out[p.key] = {
      rps: round(a.requests / a.seconds, 0), requests: a.requests, seconds: round(a.seconds), rounds: a.rounds, latencyMs: stat(lat.get(p.key)!),
      cpuUsPerRequest: { ...(p.server === undefined ? {} : { server: per(a.server) }), ...(upstreamPid === undefined ? {} : { upstream: per(a.upstream) }), client: per(a.client) },
    };
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The run

async function main() {
  const { mode, rest, num } = readFlags(process.argv.slice(2), ['dataplane', 'egress']);
  if (mode) {
    process.once('SIGTERM', () => process.exit(0));
    return mode === 'dataplane' ? serveDataPlane(rest) : serveEgress(rest);
  }
  const params = { seconds: num('seconds', 4), rounds: Math.max(1, Math.round(num('rounds', 2))), connections: num('connections', 16), samples: num('samples', 2000), workers: (rest.workers ?? '1,2').split(',').map(Number) };
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-nginx-peer-'));
  const loadStart = loadavg();
  const stops: Array<() => Promise<unknown>> = [];
  try {
    // One upstream for every path and phase: bench/egress.ts's (HTTPS with a leaf for HOST from its CA, and HTTP).
    const upstreamCaDir = join(dir, 'upstream-ca');
    const upstreamCa = await EgressCa.loadOrCreate(upstreamCaDir);
    const up = await startChild<{ httpsPort: number; httpPort: number }>(['--serve-upstream', '--ca-dir', upstreamCaDir]);
    stops.push(() => stopChild(up.child));
    const upstreamPid = up.child.pid;

    // The data-plane proxy's master and lifecycle replica, as bench/proxy.ts has them.
    const { FakeMaster } = await import('../packages/proxy/src/testing/fake-master.ts');
    const fake = new FakeMaster();
    const masterUrl = await fake.start();
    fake.add({ sandboxId: SANDBOX, envdPort: up.info.httpPort, autoResume: true });
    stops.push(() => fake.close());
    const { startLifecycle } = await import('@svc/lifecycle');
    const lc = await startLifecycle(
      { lifecycle: { replicas: 1, listen: '127.0.0.1:0', sweep_interval_ms: 60_000, warmup_sec: 3600, lease_ttl_ms: 5_000 } },
      { logger: silentLogger(), master: new MasterInternalClient(masterUrl), coordination: new MemoryCoordination(), replicaIndex: 0 },
    );
    stops.push(() => lc.close());

    // nginx's side of TLS: a leaf for the same name from a CA of its own, which the client trusts.
    const nginxCa = await EgressCa.loadOrCreate(join(dir, 'nginx-ca'));
    const nginxLeaf = nginxCa.leafFor(HOST);
    const policy: SandboxEgressPolicy = {
      sandboxId: SANDBOX, address: '127.0.0.1',
      rules: [{ name: 'bench-https', match: { host: HOST, scheme: 'https', port: up.info.httpsPort }, action: { allow: true } }],
    };
    const adminToken = randomBytes(16).toString('hex');
    const runs = [];
    for (const workers of params.workers) {
      runs.push(await runWorkers(workers));
    }

    async function runWorkers(workers: number) {
      const local: Array<() => Promise<unknown>> = [];
      try {
        const svc = await startRole<{ httpUrl: string }>(['--serve-dataplane', '--master', masterUrl, '--lifecycle', lc.url], { SVC_PROXY_WORKERS: String(workers) });
        local.push(() => stopTree(svc.child));
        const eg = await startRole<{ httpsPort: number; adminPort: number; caPem: string }>([
          '--serve-egress', '--ca-dir', join(dir, 'egress-ca'), '--upstream-ca-dir', upstreamCaDir, '--admin-token', adminToken,
          '--audit-log', join(dir, 'audit', `access-${workers}.jsonl`), '--policy', JSON.stringify(policy),
        ], { SVC_EGRESS_WORKERS: String(workers) });
        local.push(() => stopTree(eg.child));
        const put = await fetch(`http://127.0.0.1:${eg.info.adminPort}/admin/policies/${SANDBOX}`, {
          method: 'PUT', headers: { 'content-type': 'application/json', [EGRESS_ADMIN_TOKEN_HEADER]: adminToken }, body: JSON.stringify(policy),
        });
        if (!put.ok) throw new Error(`PUT policy: HTTP ${put.status} ${await put.text()}`);
        const [dpPort, tlsPort] = [await freePort(), await freePort()];
        const ngx = await startNginx({
          workers, ports: [dpPort, tlsPort],
          files: { 'leaf.pem': nginxLeaf.cert, 'leaf-key.pem': nginxLeaf.key, 'upstream-ca.pem': upstreamCa.caPem },
          http: (d) => dataPlaneServer({ port: dpPort, sandboxId: SANDBOX, upstreamPort: up.info.httpPort })
            + tlsReverseProxyServer({ port: tlsPort, serverName: HOST, upstreamPort: up.info.httpsPort, certFile: join(d, 'leaf.pem'), keyFile: join(d, 'leaf-key.pem'), upstreamCaFile: join(d, 'upstream-ca.pem') }),
        });
        local.push(() => ngx.close());
        console.log(`workers ${workers}: upstream pid ${upstreamPid}, svc proxy pid ${svc.child.pid}, egress pid ${eg.child.pid}, nginx master pid ${ngx.pid}`);

        const N = params.connections;
        const port = String(up.info.httpPort);
        const routed = { 'E2b-Sandbox-Id': SANDBOX, 'E2b-Sandbox-Port': port, Host: `${port}-${SANDBOX}.bench.local` };
        const dp = {
          direct: endpoint('direct', `http://127.0.0.1:${port}`, '/', { Host: `127.0.0.1:${port}` }),
          svc: endpoint('svc data-plane proxy', svc.info.httpUrl, '/', routed),
          nginx: endpoint('nginx', `http://127.0.0.1:${dpPort}`, '/', routed),
        };
        const dataPath = (key: PathDef['key'], server?: number): PathDef => ({
          key, server, latency: (n) => latencySamples(dp[key], n),
          rate: async (s) => { const r = await throughput(dp[key], N, s); return { requests: r.requests, seconds: r.requests / r.rps }; },
        });
        const tt = {
          direct: target('HTTPS direct', 'https', up.info.httpsPort, up.info.httpsPort, upstreamCa.caPem),
          svc: target('HTTPS via egress proxy', 'https', eg.info.httpsPort, up.info.httpsPort, eg.info.caPem),
          nginx: target('HTTPS via nginx', 'https', tlsPort, up.info.httpsPort, nginxCa.caPem),
        };
        const tlsPath = (key: PathDef['key'], fresh: boolean, server?: number): PathDef => ({
          key, server,
          latency: (n) => (fresh ? newConnectionLatency(tt[key], Math.ceil(n / 10)) : keepAliveLatency(tt[key], n)),
          rate: (s) => (fresh ? newConnectionRate : keepAliveRate)(tt[key], N, s),
        });
        const m = (paths: PathDef[]) => measure(paths, upstreamPid, params.samples, params.seconds, params.rounds);
        const dataPlane = await m([dataPath('direct'), dataPath('svc', svc.child.pid), dataPath('nginx', ngx.pid)]);
        const httpsKeepAlive = await m([tlsPath('direct', false), tlsPath('svc', false, eg.child.pid), tlsPath('nginx', false, ngx.pid)]);
        const httpsNew = await m([tlsPath('direct', true), tlsPath('svc', true, eg.child.pid), tlsPath('nginx', true, ngx.pid)]);
        const processes = { svcProxy: processTree(svc.child.pid!).length, egress: processTree(eg.child.pid!).length, nginx: processTree(ngx.pid).length };
        return judge(workers, processes, dataPlane, httpsKeepAlive, httpsNew);
      } finally {
        for (const s of local.reverse()) await s().catch((err: Error) => console.error(`nginx-peer: stopping a process of the workers-${workers} run failed: ${err.message}`));
      }
    }

    const result = {
      bench: 'nginx-peer',
      at: new Date().toISOString(),
      nginx: await nginxVersion(),
      params,
      // What the proxies' workers ran: the built bundle (as `svc up`) or the sources under tsx.
      workerCode: workerCode(),
      setup: 'load generator here; one upstream (bench/egress.ts: HTTPS and HTTP, node) and each proxy a child process; nginx from a generated config (access_log off; svc\'s egress keeps its audit log on), all on 127.0.0.1',
      goals: GOALS,
      runs,
      allMet: runs.every((r) => Object.values(r.met).every(Boolean)),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, loadavgStart: loadStart.map((x) => round(x)), loadavgEnd: loadavg().map((x) => round(x)) },
    };
    printReport(result);
    console.log(`\nwrote ${writeResult('nginx-peer', result)}`);
  } finally {
    for (const s of stops.reverse()) await s().catch((err: Error) => console.error(`nginx-peer: a shutdown step failed: ${err.message}`));
    rmSync(dir, { recursive: true, force: true });
  }
}

type Phase = Record<string, PathResult>;

/** The issue's figures for one worker count, against their goals. */
function judge(workers: number, processes: { svcProxy: number; egress: number; nginx: number }, dataPlane: Phase, httpsKeepAlive: Phase, httpsNew: Phase) {
  const cpuRatio = (p: Phase) => (p.svc.cpuUsPerRequest.server && p.nginx.cpuUsPerRequest.server ? round(p.svc.cpuUsPerRequest.server / p.nginx.cpuUsPerRequest.server) : undefined);
  const ratios = {
    dataPlaneThroughputOfNginx: round(dataPlane.svc.rps / dataPlane.nginx.rps, 3),
    dataPlaneP50OverNginxMs: round(dataPlane.svc.latencyMs.p50 - dataPlane.nginx.latencyMs.p50),
    dataPlaneCpuOverNginx: cpuRatio(dataPlane),
    egressKeepAliveOfDirect: round(httpsKeepAlive.svc.rps / httpsKeepAlive.direct.rps, 3),
    nginxKeepAliveOfDirect: round(httpsKeepAlive.nginx.rps / httpsKeepAlive.direct.rps, 3),
    egressCpuOverNginx: cpuRatio(httpsKeepAlive),
    newTlsOfNginx: round(httpsNew.svc.rps / httpsNew.nginx.rps, 3),
    newTlsCpuOverNginx: cpuRatio(httpsNew),
    /** The data plane's share of nginx's round by round (round r of each path): the spread within the run. */
    dataPlaneRoundsOfNginx: dataPlane.svc.rounds.map((v, i) => round(v / dataPlane.nginx.rounds[i], 3)),
  };
  const met = {
    dataPlaneThroughputOfNginx: ratios.dataPlaneThroughputOfNginx >= GOALS.dataPlaneThroughputOfNginx,
    dataPlaneP50OverNginxMs: ratios.dataPlaneP50OverNginxMs <= GOALS.dataPlaneP50OverNginxMs,
    egressKeepAliveOfDirect: ratios.egressKeepAliveOfDirect >= GOALS.egressKeepAliveOfDirect,
    egressCpuOverNginx: ratios.egressCpuOverNginx !== undefined && ratios.egressCpuOverNginx <= GOALS.egressCpuOverNginx,
    newTlsOfNginx: ratios.newTlsOfNginx >= GOALS.newTlsOfNginx,
  };
  // What each really ran: nginx is a master and its workers; svc's proxies one process unless they forked workers.
  const ran = { svcProxyProcesses: processes.svcProxy, egressProcesses: processes.egress, nginxWorkers: processes.nginx - 1 };
  return { workers, ran, dataPlane, httpsKeepAlive, httpsNewConnections: httpsNew, ratios, met };
}

function printReport(r: { params: { connections: number }; nginx: string; workerCode: ReturnType<typeof workerCode>; runs: Array<ReturnType<typeof judge>>; machine: { cpus: number; loadavgStart: number[]; loadavgEnd: number[] }; allMet: boolean }) {
  const pf = (ok: boolean) => (ok ? 'pass' : 'FAIL');
  const lat = (p: PathResult) => `${p.latencyMs.p50} / ${p.latencyMs.p99}`;
  const cpu = (p: PathResult) => `${p.cpuUsPerRequest.server ?? '-'} + ${p.cpuUsPerRequest.upstream ?? '?'}`;
  const rows: string[][] = [['workers', 'measure', 'direct', 'svc', 'nginx', 'result', 'goal', '']];
  for (const run of r.runs) {
    const { dataPlane: dp, httpsKeepAlive: ka, httpsNewConnections: nc, ratios: x, met } = run;
    const w = `${run.workers} (svc ${run.ran.svcProxyProcesses}/${run.ran.egressProcesses} proc, nginx ${run.ran.nginxWorkers})`;
    rows.push(
      [w, 'data plane, requests/s', String(dp.direct.rps), String(dp.svc.rps), String(dp.nginx.rps), `${x.dataPlaneThroughputOfNginx}× nginx`, `>= ${GOALS.dataPlaneThroughputOfNginx}×`, pf(met.dataPlaneThroughputOfNginx)],
      ['', 'data plane, p50 / p99 (ms)', lat(dp.direct), lat(dp.svc), lat(dp.nginx), `${x.dataPlaneP50OverNginxMs >= 0 ? '+' : ''}${x.dataPlaneP50OverNginxMs} vs nginx`, `<= +${GOALS.dataPlaneP50OverNginxMs}`, pf(met.dataPlaneP50OverNginxMs)],
      ['', 'data plane, CPU µs/req (proxy + upstream)', cpu(dp.direct), cpu(dp.svc), cpu(dp.nginx), `${x.dataPlaneCpuOverNginx ?? '?'}× nginx`, '', ''],
      ['', 'HTTPS keep-alive, requests/s', String(ka.direct.rps), String(ka.svc.rps), String(ka.nginx.rps), `${round(x.egressKeepAliveOfDirect * 100, 1)}% of direct (nginx ${round(x.nginxKeepAliveOfDirect * 100, 1)}%)`, `>= ${GOALS.egressKeepAliveOfDirect * 100}%`, pf(met.egressKeepAliveOfDirect)],
      ['', 'HTTPS keep-alive, p50 / p99 (ms)', lat(ka.direct), lat(ka.svc), lat(ka.nginx), '', '', ''],
      ['', 'HTTPS keep-alive, CPU µs/req', cpu(ka.direct), cpu(ka.svc), cpu(ka.nginx), `${x.egressCpuOverNginx ?? '?'}× nginx`, `<= ${GOALS.egressCpuOverNginx}×`, pf(met.egressCpuOverNginx)],
      ['', 'new TLS connections/s', String(nc.direct.rps), String(nc.svc.rps), String(nc.nginx.rps), `${x.newTlsOfNginx}× nginx`, `>= ${GOALS.newTlsOfNginx}×`, pf(met.newTlsOfNginx)],
      ['', 'new TLS, p50 / p99 (ms)', lat(nc.direct), lat(nc.svc), lat(nc.nginx), '', '', ''],
      ['', 'new TLS, CPU µs/req', cpu(nc.direct), cpu(nc.svc), cpu(nc.nginx), `${x.newTlsCpuOverNginx ?? '?'}× nginx`, '', ''],
    );
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  console.log(`\nsvc's proxies against nginx ${r.nginx}, ${r.params.connections} connections for the rates; ${r.machine.cpus} cores shared by client, upstream and proxy`);
  console.log(`svc's workers ran ${r.workerCode.ran === 'bundle' ? `the bundle dist/svc.mjs (built ${r.workerCode.bundleBuilt})` : 'the sources under tsx'}`);
  console.log('svc = the data-plane proxy (data plane rows) or the egress proxy (HTTPS rows); "svc a/b proc": processes the data-plane / egress proxy ran; CPU = proxy tree + upstream');
  for (const [i, row] of rows.entries()) {
    console.log(row.map((c, j) => c.padEnd(widths[j])).join('  ').trimEnd());
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
  console.log(`goals met: ${r.allMet ? 'yes' : 'no'}   (load average: ${r.machine.loadavgStart.join(' ')} at the start, ${r.machine.loadavgEnd.join(' ')} at the end)`);
}

if (process.argv[1] === thisFile) {
  main().then(
    () => { if (!readFlags(process.argv.slice(2), ['dataplane', 'egress']).mode) process.exit(0); },
    (err) => { console.error(err); process.exit(1); },
  );
}

function startRole<T>(args: string[], env: Record<string, string>): Promise<{ child: ChildProcess; info: T }> {
  return startChildRole<T>(thisFile, args, { env });
}
