/**
 * Issue 34's Prometheus figure: how long a scrape of GET /metrics takes with 1,000 live sandboxes
 * recorded (the goal: at most 50 ms). A real master (SQLite, as `svc up` runs it) and a gateway in
 * one process, as `svc up` runs them, with three nodes registered and the sandbox rows inserted
 * straight into t_svc_sandbox (as many creates would leave them); each scrape reads the tables
 * (svc_sandboxes, svc_build_jobs, svc_node_memory_bytes) and renders every metric of the process.
 *
 *   node --import tsx bench/metrics.ts [--sandboxes 1000] [--runs 500]
 * Prints a table and writes bench/results/metrics.json.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, silentLogger } from '@svc/common';
import { startMaster } from '@svc/master';
import { startApiGateway } from '@svc/api';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import type { SandboxRow } from '../packages/master/src/db/schema.ts';
import { printTable, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const SANDBOXES = numberArg('sandboxes', 1000);
const RUNS = numberArg('runs', 500);
const ADMIN = `e2b_${'a'.repeat(40)}`;
const GOAL_MS = 50;
const STATES = ['running', 'running', 'running', 'running', 'running', 'running', 'paused', 'paused', 'pausing', 'resuming'];
const TEMPLATES = ['base', 'code-interpreter-v1', 'tpl-ci', 'tpl-web', 'tpl-data'];

function sandboxRow(i: number, now: number): SandboxRow {
  return {
    sandbox_id: `bench${String(i).padStart(6, '0')}`, team_id: DEFAULT_TEAM_ID, iam: null, template_id: TEMPLATES[i % TEMPLATES.length]!, alias: null, node_id: `n${i % 3}`,
    state: STATES[i % STATES.length]!, pause_kind: null, address: `10.0.${i >> 8}.${i & 255}`, envd_port: 49983, envd_version: '0', envd_access_token: null,
    traffic_access_token: null, secure: 0, runtime: i % 4 === 0 ? 'microvm' : 'gvisor', cpu_count: 1, memory_mb: 512, disk_size_mb: 2048, metadata: '{}', network: '{}',
    allow_internet_access: null, on_timeout: 'kill', auto_resume: 0, timeout_sec: 300, end_at: now + 300_000, started_at: now, created_at: now, updated_at: now,
    terminated_at: null, terminate_reason: null, volume_mounts: '[]', env_vars: null, auto_pause_memory: 1, pause_snapshot_id: null, node_selector: null,
  };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-metrics-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  cfg.api.listen = '127.0.0.1:0';
  cfg.api.api_key = ADMIN;
  cfg.api.audit_log = join(dir, 'audit.jsonl');
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination: new MemoryCoordination(),
    templates: async () => ({ resolver: { async resolveForCreate() { throw new Error('unused'); }, async idsFor(r: string) { return [r]; }, async artifactRef() { throw new Error('unused'); } }, onNodeRegistered() {}, async close() {} }),
  });
  const gateway = await startApiGateway(cfg, { logger: silentLogger(), masterUrl: master.url });
  try {
    for (let n = 0; n < 3; n++) {
      await master.nodes.register({
        nodeId: `n${n}`, address: `http://127.0.0.1:${9 + n}`, runtime: 'gvisor', pauseKinds: ['freeze'],
        capacity: { cpuCount: 16, memoryMB: 65_536 }, pausedResourceReleaseRatio: 0, version: 'bench',
      });
    }
    const now = Date.now();
    const rows = Array.from({ length: SANDBOXES }, (_, i) => sandboxRow(i, now));
    // SQLite takes at most 999 bound values a statement: 25 rows of 36 columns at a time.
    for (let i = 0; i < rows.length; i += 25) await master.db.kysely.insertInto('t_svc_sandbox').values(rows.slice(i, i + 25)).execute();

    const scrape = (url: string, headers: Record<string, string>) => fetch(url, { headers }).then(async (r) => {
      const body = await r.text();
      if (r.status !== 200) throw new Error(`${url} answered ${r.status}: ${body.slice(0, 200)}`);
      return body;
    });
    const viaGateway = () => scrape(`${gateway.url}/metrics`, { authorization: `Bearer ${ADMIN}` });
    const viaMaster = () => scrape(`${master.url}/metrics`, {});
    const health = () => scrape(`${gateway.url}/health`, {});
    const body = await viaGateway();
    const live = body.split('\n').filter((l) => l.startsWith('svc_sandboxes{')).reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    if (live !== SANDBOXES) throw new Error(`the scrape counts ${live} live sandboxes, not ${SANDBOXES}`);
    for (let i = 0; i < 20; i++) { await viaGateway(); await viaMaster(); await health(); }

    const gw: number[] = [];
    const direct: number[] = [];
    const floor: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      gw.push((await timed(viaGateway))[0]);
      direct.push((await timed(viaMaster))[0]);
      floor.push((await timed(health))[0]);
    }
    const latency: Record<string, Stat> = {
      [`GET /metrics, API port, admin key, ${SANDBOXES} sandboxes (ms)`]: stat(gw),
      [`GET /metrics, master's port (ms)`]: stat(direct),
      'floor: GET /health, API port (ms)': stat(floor),
    };
    printTable(`Prometheus scrape with ${SANDBOXES} live sandboxes recorded`, latency);
    const series = body.split('\n').filter((l) => l && !l.startsWith('#')).length;
    const p95 = stat(gw).p95;
    console.log(`${series} series, ${body.length} bytes a scrape; p50 ${stat(gw).p50} ms, p95 ${p95} ms (goal ≤ ${GOAL_MS} ms: ${p95 <= GOAL_MS ? 'met' : 'NOT met'})`);
    console.log(`wrote ${writeResult('metrics', { sandboxes: SANDBOXES, runs: RUNS, latency, series, bodyBytes: body.length, goalMs: GOAL_MS, goalMet: p95 <= GOAL_MS })}`);
  } finally {
    await gateway.close();
    await master.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
