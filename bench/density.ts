/**
 * Density by real memory: idle `base` sandboxes are created through `svc up` (REST, two at a
 * time) until the platform refuses one for memory, or --max is reached. Measured: how many
 * were created, host memory used per sandbox (MemTotal - MemAvailable delta over the run),
 * create latency as the host fills, and the API's latency and a command's round trip with all
 * of them running (the host must stay responsive). Then every sandbox is killed.
 *
 *   node --import tsx bench/density.ts [--max 1200] [--minutes 50]
 * Run as root. Prints tables and writes bench/results/density.json.
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { printTable, stat, timed, usedMemoryMB, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const MAX = numberArg('max', 1200);
const MINUTES = numberArg('minutes', 50);
const CONCURRENCY = 2;
const DATA = '/tmp/svc-bench-density';
const progress = (what: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${what}\n`);
const meminfoUsedMB = () => usedMemoryMB(readFileSync('/proc/meminfo', 'utf8'));

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { progress(`${sig}: stopping the platform`); void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

async function call<T>(p: RunningPlatform, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(p.apiUrl + path, {
    method, headers: { 'X-API-Key': p.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined, signal: AbortSignal.timeout(180_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function apiLatency(p: RunningPlatform, ids: string[], n: number): Promise<{ detail: Stat; list: Stat }> {
  const detail: number[] = [];
  const list: number[] = [];
  for (let i = 0; i < n; i++) {
    detail.push((await timed(() => call(p, 'GET', `/sandboxes/${ids[(i * 7919) % ids.length]}`)))[0]);
    list.push((await timed(() => call(p, 'GET', '/v2/sandboxes?limit=100')))[0]);
  }
  return { detail: stat(detail), list: stat(list) };
}

async function main() {
  const p = await startPlatform({ dataDir: DATA, env: { SVC_ADDRESS_POOL: '10.213.0.0/16', SVC_WARM_POOL_SIZE: '0' } });
  platform = p;
  useE2bEnv(p);
  const baseline = meminfoUsedMB();
  const ids: string[] = [];
  const createMs: number[] = [];
  const checkpoints: Array<{ sandboxes: number; usedMB: number; perSandboxMB: number; createP50: number; apiDetailP50: number; load1: number }> = [];
  let refusal: string | undefined;
  const deadline = Date.now() + MINUTES * 60_000;
  let failures = 0;
  const worker = async () => {
    while (!refusal && ids.length < MAX && Date.now() < deadline && failures < 20) {
      const [ms, r] = await timed(() => call<{ sandboxID: string; message: string }>(p, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: -1 }));
      if (r.status === 201) { ids.push(r.body.sandboxID); createMs.push(ms); continue; }
      if (r.status === 503 && /memory/.test(r.body.message)) { refusal = r.body.message; break; }
      failures++;
      progress(`create answered ${r.status}: ${r.body?.message}`);
    }
  };
  let lastCheckpoint = 0;
  const watcher = setInterval(() => {
    if (ids.length - lastCheckpoint < 50) return;
    lastCheckpoint = ids.length;
    const usedMB = meminfoUsedMB() - baseline;
    const recent = createMs.slice(-50);
    void timed(() => call(p, 'GET', `/sandboxes/${ids[0]}`)).then(([apiMs]) => {
      checkpoints.push({ sandboxes: ids.length, usedMB, perSandboxMB: Math.round((usedMB / ids.length) * 10) / 10, createP50: stat(recent).p50, apiDetailP50: Math.round(apiMs), load1: Math.round(loadavg()[0] * 10) / 10 });
      progress(`${ids.length} sandboxes, ${usedMB} MB used (${(usedMB / ids.length).toFixed(1)} MB each), create p50 of the last 50 ${stat(recent).p50} ms, load ${loadavg()[0].toFixed(1)}`);
    });
  }, 1_000);
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  clearInterval(watcher);
  progress(`stopped creating: ${refusal ? `refused: ${refusal}` : ids.length >= MAX ? `--max ${MAX} reached` : failures >= 20 ? 'too many failures' : 'time is up'}`);

  // With every sandbox running: the API and a command must still answer quickly.
  await new Promise((r) => setTimeout(r, 10_000));
  const usedAtFull = meminfoUsedMB() - baseline;
  const atFull = await apiLatency(p, ids, 50);
  const sbx = await Sandbox.connect(ids[ids.length - 1]);
  const echo: number[] = [];
  for (let i = 0; i < 10; i++) echo.push((await timed(() => sbx.commands.run('echo ok')))[0]);
  const load = loadavg();

  progress(`killing ${ids.length} sandboxes`);
  const queue = [...ids];
  await Promise.all(Array.from({ length: 4 }, async () => {
    for (let id = queue.pop(); id; id = queue.pop()) await call(p, 'DELETE', `/sandboxes/${id}`).catch((err) => progress(`kill ${id}: ${err}`));
  }));
  await p.stop();
  platform = undefined;

  const rows: Record<string, Stat> = {
    'create, as the host fills (ms)': stat(createMs),
    'GET /sandboxes/{id} at full (ms)': atFull.detail,
    'GET /v2/sandboxes?limit=100 at full (ms)': atFull.list,
    "commands.run('echo') at full (ms)": stat(echo),
  };
  printTable(`density: ${ids.length} idle sandboxes`, rows);
  const perSandboxMB = Math.round((usedAtFull / Math.max(1, ids.length)) * 10) / 10;
  console.log(`sandboxes created: ${ids.length}; host memory used ${usedAtFull} MB (${perSandboxMB} MB each); load average at full ${load.map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`stopped by: ${refusal ?? 'the limits of the run'}`);
  const file = writeResult('density', {
    sandboxes: ids.length, stoppedBy: refusal ?? (ids.length >= MAX ? 'max' : 'time'), hostMemoryUsedMB: usedAtFull, perSandboxMB,
    loadAverageAtFull: load, latency: rows, checkpoints, goal: { sandboxes: 800, apiP50Ms: 50 },
  });
  console.log(`wrote ${file}`);
}

main().catch(async (err) => {
  console.error(err);
  await platform?.stop().catch((err: Error) => console.error(`density: stopping the platform failed: ${err.message}`));
  process.exit(1);
});
