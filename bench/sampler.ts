/**
 * Issue 34's figures for the metrics history (docs/observability.md, "Metrics history"):
 * - the node agent's sampler with N idle gVisor sandboxes: CPU per round (one every 5 s) as a
 *   share of one core (goal with 500: ≤ 2 %), and a round's wall time;
 * - the master's database growth per sandbox-hour (720 samples of one sandbox, SQLite).
 * A real node agent (runsc) on a busybox root filesystem, without a master: each round is read
 * and let go, as one with a master is read and sent.
 *
 *   node --import tsx bench/sampler.ts [--n 500] [--rounds 12]
 * Run as root. Prints a table and writes bench/results/sampler.json.
 */
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { sql } from 'kysely';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, silentLogger } from '@svc/common';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { SAMPLE_INTERVAL_MS } from '@svc/contracts/metrics-history';
import { startNodeAgent } from '@svc/node-agent';
import { createRequest, makeTestEnv } from '@svc/node-agent/testing/fixtures';
import { openDatabase } from '../packages/master/src/db/connect.ts';
import { migrate } from '../packages/master/src/db/migrator.ts';
import { migrations } from '../packages/master/src/migrations/index.ts';
import { MetricsHistoryRepo } from '../packages/master/src/metrics-history/repo.ts';
import { numberArg } from './lib/args.ts';
import { printTable, stat, writeResult } from './lib/stats.ts';

const N = numberArg('n', 500);
const ROUNDS = numberArg('rounds', 12);
const POOL = '10.201.160.0/21';
const progress = (what: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${what}\n`);

async function samplerCost() {
  const env = await makeTestEnv('sampler', POOL);
  const cfg = env.config({ warm_pool_size: 0 });
  cfg.svclet_conf = { ...cfg.svclet_conf, default_memory_mb: 64 };
  const agent = await startNodeAgent(cfg, { logger: silentLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
  const client = new NodeAgentClient(agent.url);
  try {
    let failed = 0;
    for (let made = 0; made < N;) {
      const batch = Math.min(2, N - made);
      const results = await Promise.allSettled(Array.from({ length: batch }, () => client.createSandbox(createRequest(env, { memoryMB: 64, timeoutMs: 120_000 }))));
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      // A create that timed out on a busy machine is tried again; many in a row end the run.
      failed += batch - ok;
      if (failed > 20) throw new Error(`${failed} creates failed; last: ${(results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined)?.reason}`);
      const before = made;
      made += ok;
      if (Math.floor(made / 50) > Math.floor(before / 50) || made === N) progress(`${made} of ${N} sandboxes (${failed} creates failed and were tried again)`);
    }
    // The first round takes each sandbox's CPU base; the measured ones read against it.
    await agent.sampleMetrics();
    const cpuMs: number[] = [];
    const wallMs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const cpu = process.cpuUsage();
      const t = performance.now();
      await agent.sampleMetrics();
      wallMs.push(performance.now() - t);
      const used = process.cpuUsage(cpu);
      cpuMs.push((used.user + used.system) / 1000);
      await new Promise((r) => setTimeout(r, 500));
    }
    return { cpuMs: stat(cpuMs), wallMs: stat(wallMs) };
  } finally {
    progress('removing the sandboxes');
    await agent.close({ destroySandboxes: true });
    await env.cleanup();
  }
}

/** SQLite's file growth for an hour of one sandbox's samples, over 10 sandboxes. */
async function dbGrowthPerSandboxHour(): Promise<number> {
  const dir = join(tmpdir(), `svc-bench-sampler-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'm.sqlite');
  const db = await openDatabase({ driver: 'sqlite', path }, silentLogger());
  try {
    await migrate(db.kysely, db.driver, migrations);
    const repo = new MetricsHistoryRepo(db.kysely, db.driver);
    const before = statSync(path).size + (statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0);
    const start = Date.now() - 3_600_000;
    const perHour = 3_600_000 / SAMPLE_INTERVAL_MS;
    for (let s = 0; s < 10; s++) {
      const rows = Array.from({ length: perHour }, (_, i) => ({
        sandbox_id: `sbx${String(s).padStart(17, '0')}`, team_id: '00000000-0000-4000-8000-000000000001', at: start + i * SAMPLE_INTERVAL_MS,
        cpu_count: 2, cpu_used_pct: Math.round(Math.random() * 10_000) / 100, mem_used: 200_000_000 + i, mem_total: 536_870_912, mem_cache: 1_000_000, disk_used: 30_000_000 + i, disk_total: 2_147_483_648,
      }));
      await repo.insertSamples(rows);
    }
    // Pages still in the WAL file are counted there; a checkpoint moves them into the database.
    await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(db.kysely);
    const after = statSync(path).size + (statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0);
    return Math.round((after - before) / 10);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('run as root');
  const growth = await dbGrowthPerSandboxHour();
  const cost = await samplerCost();
  const corePct = Math.round((cost.cpuMs.p50 / SAMPLE_INTERVAL_MS) * 100 * 100) / 100;
  printTable(`Metrics sampler, ${N} idle gVisor sandboxes (${ROUNDS} rounds; one round every ${SAMPLE_INTERVAL_MS / 1000} s)`, {
    'CPU of one round (ms)': cost.cpuMs,
    'wall time of one round (ms)': cost.wallMs,
  });
  console.log(`\nsampler CPU at one round every 5 s: ${corePct} % of one core (goal with 500: ≤ 2 %)`);
  console.log(`database growth: ${growth} bytes per sandbox-hour (${(growth / 1024).toFixed(1)} KiB; SQLite)`);
  const file = writeResult('sampler', { sandboxes: N, rounds: ROUNDS, cost, corePctAtFiveSeconds: corePct, dbBytesPerSandboxHour: growth, goals: { corePct: 2 } });
  console.log(`wrote ${file}`);
}

main().catch((err) => { console.error(err); process.exit(1); });
