import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
/**
 * The signed file URL look-up of the single-URL mode (issue 9): a `/files?...&signature=` URL
 * that names no sandbox is routed to the sandbox whose envd access token produced the signature,
 * which the master finds by hashing once per live sandbox. Measured through the master's internal
 * route with 1,000 secured sandboxes recorded (SQLite, as `svc up` runs it), against the floor of
 * a plain route look-up by id on the same master.
 *
 *   node --import tsx bench/signed-urls.ts [--sandboxes 1000]
 * Prints a table and writes bench/results/signed-urls.json.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, silentLogger } from '@svc/common';
import { fileSignature } from '@svc/common/envd-signature';
import { startMaster } from '@svc/master';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { printTable, stat, timed, writeResult } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('sandboxes', 1000);
const RUNS = 200;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-signed-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination: new MemoryCoordination(),
    templates: async () => ({ resolver: { async resolveForCreate() { throw new Error('unused'); }, async idsFor(r: string) { return [r]; }, async artifactRef() { throw new Error('unused'); } }, onNodeRegistered() {}, async close() {} }),
  });
  try {
    const now = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < N; i++) {
      const id = `bench${String(i).padStart(15, '0')}`;
      ids.push(id);
      await master.db.kysely.insertInto('t_svc_sandbox').values({
        sandbox_id: id, team_id: DEFAULT_TEAM_ID, template_id: 'tpl-bench', alias: null, node_id: 'n1', state: 'running', pause_kind: null,
        address: '10.0.0.2', envd_port: 49983, envd_version: '0.6.4', envd_access_token: `token-${i}`, traffic_access_token: null,
        secure: 1, runtime: 'gvisor', cpu_count: 1, memory_mb: 512, disk_size_mb: 2048, metadata: '{}', network: '{}',
        allow_internet_access: null, on_timeout: 'kill', auto_resume: 0, timeout_sec: -1, end_at: null,
        started_at: now + i, created_at: now, updated_at: now, terminated_at: null, terminate_reason: null, volume_mounts: '[]', env_vars: null, auto_pause_memory: 1,
      }).execute();
    }
    const client = new MasterInternalClient(master.url);
    const signed = (i: number) => ({ path: '/home/user/f.txt', operation: 'read' as const, username: 'user', expiration: String(Math.floor(now / 1000) + 600),
      signature: fileSignature('/home/user/f.txt', 'read', 'user', `token-${i}`, Math.floor(now / 1000) + 600) });
    const byId: number[] = [];
    const last: number[] = [];
    const miss: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      byId.push((await timed(() => client.route(ids[r % N])))[0]);
      // The worst match is the last row the master reads; a miss reads and hashes every row.
      last.push((await timed(() => client.routeBySignature(signed(N - 1))))[0]);
      miss.push((await timed(() => client.routeBySignature({ ...signed(0), signature: 'v1_nobody' }).catch(() => { /* the refusal is expected: only its time is measured */ })))[0]);
    }
    const rows = {
      [`floor: route by id, ${N} sandboxes (ms)`]: stat(byId),
      [`route by signature, the last of ${N} (ms)`]: stat(last),
      [`route by signature, no match among ${N} (ms)`]: stat(miss),
    };
    printTable(`signed file URL look-up, ${N} secured sandboxes`, rows);
    const addedP50 = Math.round((stat(miss).p50 - stat(byId).p50) * 100) / 100;
    console.log(`added by the look-up at p50: ${addedP50} ms (${Math.round((addedP50 / N) * 1000 * 100) / 100} µs a sandbox)`);
    console.log(`wrote ${writeResult('signed-urls', { sandboxes: N, runs: RUNS, latency: rows, addedP50Ms: addedP50 })}`);
  } finally {
    await master.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
