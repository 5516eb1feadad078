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
 * The peers it starts are in bench/egress/peers.ts, the load generator in bench/egress/load.ts,
 * the measurement in bench/egress/measure.ts, the goals and the table in bench/egress/report.ts.
 *
 * Prints a table and writes bench/results/egress.json (not with --only).
 * SVC_BENCH_CPU_PROF=<dir> writes a CPU profile of the proxy child into <dir>.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EGRESS_ADMIN_TOKEN_HEADER, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressCa } from '@svc/egress';
import { writeResult } from './lib/stats.ts';
import { readFlags } from './lib/args.ts';
import { startChildRole } from './lib/child-role.ts';
import { HOST, serveProxy, serveUpstream, stopChild } from './egress/peers.ts';
import { keepAliveLatency, keepAliveRate, newConnectionLatency, newConnectionRate, nodeAgentRate, target, type Target } from './egress/load.ts';
import { fileSize, paired, round, summarize, withCpu } from './egress/measure.ts';
import { GOALS, printReport } from './egress/report.ts';

/** What bench/nginx-peer.ts runs of this bench: its upstream role, its client and its stop. */
export { HOST, keepAliveLatency, keepAliveRate, newConnectionLatency, newConnectionRate, stopChild, target };

const thisFile = fileURLToPath(import.meta.url);
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
