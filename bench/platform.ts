/**
 * The whole platform, measured through `svc up` as users reach it, each figure beside its floor
 * from the same run:
 *   - create latency (API call until envd answers through the proxy), cold and with a warm pool,
 *     against `runsc run` of the same root filesystem (the base template) until envd answers;
 *   - pause and resume (freeze) through the API;
 *   - `commands.run('echo')` through the official e2b SDK against `runsc exec echo`;
 *   - memory per idle sandbox (host used-memory delta) and how many fit in 24 GiB;
 *   - data-plane proxy overhead against a direct connection to the same sandbox port;
 *   - auto-resume latency (request to a paused sandbox until its response).
 *
 *   node --import tsx bench/platform.ts [--creates 50] [--n 20] [--idle 20]
 * Run as root. Prints tables and writes bench/results/platform.json.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { RunscFloor } from './lib/runsc-floor.ts';
import { BENCH_ROOT, printTable, ratio, sleep, stat, timed, usedMemoryMB, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';
import { KEEPALIVE_SERVER_ON_8000 } from './lib/sandbox-server.ts';
import { endpoint, latencySamples, measureAutoResume, throughput } from './proxy.ts';

const run = promisify(execFile);
const CREATES = numberArg('creates', 50);
const N = numberArg('n', 20);
const IDLE = Math.max(20, numberArg('idle', 20));
const DATA = '/tmp/svc-bench-data';
/** A pool of its own: sandboxes a killed run leaves behind never sit on the e2e tests' addresses. */
const BENCH_NETWORK = { SVC_ADDRESS_POOL: '10.211.0.0/16' };

/** Ctrl-C stops the platform, which destroys its sandboxes, before the bench exits. */
function stopOnSignal(current: () => RunningPlatform): void {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      console.error(`${sig}: stopping the platform`);
      current().stop().finally(() => process.exit(130));
    });
  }
}
const progress = (what: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${what}\n`);

interface Api { p: RunningPlatform; call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> }

function api(p: RunningPlatform): Api {
  return {
    p,
    async call<T>(method: string, path: string, body?: unknown) {
      const res = await fetch(p.apiUrl + path, {
        method, headers: { 'X-API-Key': p.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
    },
  };
}

/** envd's /health through the data-plane proxy: the sandbox answers. */
async function envdAnswers(p: RunningPlatform, id: string): Promise<void> {
  for (;;) {
    const r = await fetch(`${p.sandboxUrl}/health`, { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983' } }).catch(() => { /* not answering yet: poll again */ return undefined; });
    if (r && r.status < 300) return;
    await sleep(2);
  }
}

async function createUntilEnvd(a: Api): Promise<[number, string]> {
  return timed(async () => {
    const { body } = await a.call<{ sandboxID: string }>('POST', '/v2/sandboxes', { templateID: 'base', timeout: 600 });
    await envdAnswers(a.p, body.sandboxID);
    return body.sandboxID;
  });
}

/** The node agent's record of a sandbox: its runsc container and network namespace. */
function instanceOf(sandboxId: string): { container: string; netns: string; address: string } {
  const dir = join(DATA, 'node', 'instances');
  for (const inst of readdirSync(dir)) {
    const rec = JSON.parse(readFileSync(join(dir, inst, 'record.json'), 'utf8')) as { sandboxId?: string; netns: string; address: string };
    // the node agent names a sandbox's runsc container like its network namespace
    if (rec.sandboxId === sandboxId) return { container: rec.netns, netns: rec.netns, address: rec.address };
  }
  throw new Error(`no node record for ${sandboxId}`);
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root');
  const results: Record<string, unknown> = {
    when: new Date().toISOString(),
    host: { node: process.version, cpus: cpus().length, loadavgAtStart: loadavg().map((l) => Math.round(l * 100) / 100) },
    settings: { creates: CREATES, n: N, idle: IDLE },
  };
  const rows: Record<string, Stat> = {};

  // ---- cold platform (no warm pool)
  let p = await startPlatform({ dataDir: DATA, env: { ...BENCH_NETWORK, SVC_WARM_POOL_SIZE: '0', SVC_LOG_LEVEL: 'warn' } });
  stopOnSignal(() => p);
  useE2bEnv(p);
  let a = api(p);
  try {
    const base = (await a.call<{ artifact_id: string }>('GET', '/svc/template/base')).body;
    const image = join(DATA, 'node', 'artifacts', `${base.artifact_id}.ext4`);

    progress('cold creates, interleaved with the runsc floor');
    await a.call('DELETE', `/sandboxes/${(await createUntilEnvd(a))[1]}`); // first use: artifact mounted, caches warm
    // Interleaved with the floor, so that the machine's load weighs on both alike.
    const floorRunner = new RunscFloor({ image, envdBundle: join(BENCH_ROOT, '..', 'dist', 'envd.mjs'), workDir: '/tmp/svc-bench-floor', pool: '10.201.102.0/24' });
    await floorRunner.prepare();
    const cold: number[] = [];
    const floor: number[] = [];
    try {
      for (let i = 0; i < CREATES; i++) {
        const [ms, id] = await createUntilEnvd(a);
        cold.push(ms);
        await a.call('DELETE', `/sandboxes/${id}`);
        floor.push(await floorRunner.runOnce());
      }
    } finally {
      await floorRunner.close();
    }
    rows['create, cold: API call → envd answers (ms)'] = stat(cold);
    rows['floor: runsc run → envd answers (ms)'] = stat(floor);

    progress('pause/resume, echo');
    // pause / resume and echo on one sandbox
    const sbx = await Sandbox.create('base', { timeoutMs: 600_000 });
    const pause: number[] = [];
    const resume: number[] = [];
    for (let i = 0; i < N; i++) {
      pause.push((await timed(() => a.call('POST', `/sandboxes/${sbx.sandboxId}/pause`)))[0]);
      resume.push((await timed(() => a.call('POST', `/v2/sandboxes/${sbx.sandboxId}/connect`, {})))[0]);
    }
    rows['pause (freeze) via API (ms)'] = stat(pause);
    rows['resume (freeze) via API connect (ms)'] = stat(resume);

    const echo: number[] = [];
    for (let i = 0; i < N; i++) {
      const [ms, r] = await timed(() => sbx.commands.run('echo hi'));
      if (r.stdout.trim() !== 'hi') throw new Error(`echo printed ${r.stdout}`);
      echo.push(ms);
    }
    const inst = instanceOf(sbx.sandboxId);
    const execEcho: number[] = [];
    for (let i = 0; i < N; i++) {
      const [ms, r] = await timed(() => run('nsenter', [`--net=/var/run/netns/${inst.netns}`, 'runsc', `--root=${join(DATA, 'node', 'runsc')}`,
        '--platform=ptrace', '--network=host', 'exec', '--user', '1000:1000', '--cwd', '/home/user', inst.container, '/bin/bash', '-l', '-c', 'echo hi']));
      if (r.stdout.trim() !== 'hi') throw new Error(`runsc exec printed ${r.stdout}`);
      execEcho.push(ms);
    }
    rows["commands.run('echo') via e2b SDK (ms)"] = stat(echo);
    // The same command the SDK sends: `bash -l -c "echo hi"` as `user`.
    rows['runsc exec echo (ms)'] = stat(execEcho);

    progress('proxy overhead');
    // proxy overhead: a server in the sandbox, reached directly and through the proxy
    await sbx.commands.run(KEEPALIVE_SERVER_ON_8000);
    const direct = endpoint('direct', `http://${inst.address}:8000`, '/', { Host: `${inst.address}:8000` });
    const proxied = endpoint('proxy', p.sandboxUrl, '/', { Host: `8000-${sbx.sandboxId}.${p.domain}` });
    for (let i = 0; i < 100; i++) { if (await latencySamples(direct, 1).then(() => true, () => { /* the server is not up yet */ return false; })) break; await sleep(100); }
    await latencySamples(direct, 200);
    await latencySamples(proxied, 200);
    const dLat = stat(await latencySamples(direct, 1000));
    const pLat = stat(await latencySamples(proxied, 1000));
    const dTp = await throughput(direct, 8, 4);
    const pTp = await throughput(proxied, 8, 4);
    rows['sandbox port, direct (ms)'] = dLat;
    rows['sandbox port, through the proxy (ms)'] = pLat;
    results.proxy = {
      addedP50Ms: Math.round((pLat.p50 - dLat.p50) * 1000) / 1000, addedP99Ms: Math.round((pLat.p99 - dLat.p99) * 1000) / 1000,
      directRps: Math.round(dTp.rps), proxiedRps: Math.round(pTp.rps), throughputRatio: ratio(pTp.rps, dTp.rps),
      goal: { addedP50Ms: 0.5, throughputRatio: 0.7 },
    };
    await sbx.kill();

    progress('auto-resume');
    // auto-resume latency
    const ar = await Sandbox.create('base', { timeoutMs: 600_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
    await ar.commands.run('nohup python3 -m http.server 8000 >/dev/null 2>&1 &');
    for (let i = 0; i < 100; i++) {
      const r = await fetch(`${p.sandboxUrl}/`, { headers: { 'E2b-Sandbox-Id': ar.sandboxId, 'E2b-Sandbox-Port': '8000' } }).catch(() => { /* the server is not up yet: poll again */ return undefined; });
      if (r?.status === 200) break;
      await sleep(100);
    }
    const resumed = await measureAutoResume({
      proxyUrl: p.sandboxUrl, sandboxId: ar.sandboxId, port: 8000, rounds: N,
      pause: async () => { await a.call('POST', `/sandboxes/${ar.sandboxId}/pause`); await sleep(300); },
    });
    rows['auto-resume: request to a paused sandbox → response (ms)'] = stat(resumed.samplesMs);
    await ar.kill();

    progress('memory');
    // memory per idle sandbox
    await sleep(2000);
    const before = usedMemoryMB(await readFile('/proc/meminfo', 'utf8'));
    const idle: string[] = [];
    for (let i = 0; i < IDLE; i++) idle.push((await createUntilEnvd(a))[1]);
    await sleep(5000);
    const after = usedMemoryMB(await readFile('/proc/meminfo', 'utf8'));
    const per = (after - before) / IDLE;
    results.memory = { idleSandboxes: IDLE, usedDeltaMB: Math.round(after - before), perSandboxMB: Math.round(per * 10) / 10, fitIn24GiB: Math.floor((24 * 1024) / per), goalPerSandboxMB: 30 };
    for (const id of idle) await a.call('DELETE', `/sandboxes/${id}`);
  } finally {
    await p.stop();
  }

  // ---- warm pool
  progress('warm pool');
  p = await startPlatform({ dataDir: DATA, env: { ...BENCH_NETWORK, SVC_WARM_POOL_SIZE: '2', SVC_LOG_LEVEL: 'warn' } });
  a = api(p);
  try {
    await a.call('DELETE', `/sandboxes/${(await createUntilEnvd(a))[1]}`); // fills the pool for this template
    const warm: number[] = [];
    for (let i = 0; i < CREATES; i++) {
      await sleep(1500); // let the pool refill, as it does between real requests
      const [ms, id] = await createUntilEnvd(a);
      warm.push(ms);
      await a.call('DELETE', `/sandboxes/${id}`);
    }
    rows['create, warm pool: API call → envd answers (ms)'] = stat(warm);
  } finally {
    await p.stop();
  }

  const floorP50 = rows['floor: runsc run → envd answers (ms)'].p50;
  results.latency = rows;
  results.ratios = {
    coldCreateOverFloorP50: ratio(rows['create, cold: API call → envd answers (ms)'].p50, floorP50),
    coldCreateOverFloorP95: ratio(rows['create, cold: API call → envd answers (ms)'].p95, rows['floor: runsc run → envd answers (ms)'].p95),
    warmCreateP50Ms: rows['create, warm pool: API call → envd answers (ms)'].p50,
    echoOverRunscExecP50: ratio(rows["commands.run('echo') via e2b SDK (ms)"].p50, rows['runsc exec echo (ms)'].p50),
    goals: { coldOverFloor: 1.25, warmP50Ms: 50, pauseMs: 300, resumeMs: 300, autoResumeP50Ms: 300 },
  };
  printTable(`svc platform through svc up (${cpus().length} CPUs, load at start ${(results.host as { loadavgAtStart: number[] }).loadavgAtStart[0]})`, rows);
  console.log('\nratios and goals:', JSON.stringify(results.ratios));
  console.log('proxy vs direct on a sandbox port:', JSON.stringify(results.proxy));
  console.log('memory:', JSON.stringify(results.memory));
  console.log(`wrote ${writeResult('platform', results)}`);
}

await main();
