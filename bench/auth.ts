/**
 * Issue 19's figures: what key verification adds to an API request with 10,000 keys stored, what
 * resolving `${e2b.secrets.NAME}` costs an egress request, and how fast workload tokens are minted.
 * A real master (SQLite, as `svc up` runs it) and two gateways on it: one checking keys, one with
 * authentication off (the floor: the same request without the key check).
 *
 *   node --import tsx bench/auth.ts [--keys 10000]
 * Prints a table and writes bench/results/auth.json.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, silentLogger } from '@svc/common';
import { startMaster } from '@svc/master';
import { startApiGateway } from '@svc/api';
import { apiKeyHash, apiKeyMask, DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { SecretResolverClient } from '@svc/contracts/secrets';
import { IdentityMintClient } from '@svc/contracts/identity';
import { PlaceholderResolver } from '@svc/egress';
import { printTable, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const KEYS = numberArg('keys', 10_000);
const RUNS = 1000;
const ADMIN = `e2b_${'a'.repeat(40)}`;
const EGRESS_TOKEN = 'bench-egress-admin-token';
const r2 = (v: number) => Math.round(v * 100) / 100;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-auth-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  cfg.api.listen = '127.0.0.1:0';
  cfg.egress.admin_token = EGRESS_TOKEN;
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination: new MemoryCoordination(),
    templates: async () => ({ resolver: { async resolveForCreate() { throw new Error('unused'); }, async idsFor(r: string) { return [r]; }, async artifactRef() { throw new Error('unused'); } }, onNodeRegistered() {}, async close() {} }),
  });
  const checking = await startApiGateway({ ...cfg, api: { ...cfg.api, api_key: ADMIN, audit_log: join(dir, 'a1.jsonl') } }, { logger: silentLogger(), masterUrl: master.url });
  const open = await startApiGateway({ ...cfg, api: { ...cfg.api, api_key: '', audit_log: join(dir, 'a2.jsonl') } }, { logger: silentLogger(), masterUrl: master.url });
  try {
    // 10,000 keys of 100 teams, straight into the table (as many POSTs would leave it).
    const keys: string[] = [];
    const now = Date.now();
    for (let t = 0; t < 100; t++) {
      const teamId = randomUUID();
      await master.db.kysely.insertInto('t_svc_team').values({ team_id: teamId, name: `bench-${t}`, is_default: 0, limits: '{}', created_at: now }).execute();
      const rows = [];
      for (let k = 0; k < KEYS / 100; k++) {
        const key = `e2b_${randomBytes(20).toString('hex')}`;
        keys.push(key);
        rows.push({ key_id: randomUUID(), team_id: teamId, name: 'bench', key_hash: apiKeyHash(key), mask: JSON.stringify(apiKeyMask(key)), created_at: now, last_used_at: null, revoked_at: null });
      }
      await master.db.kysely.insertInto('t_svc_api_key').values(rows).execute();
    }
    const get = (base: string, key?: string) => fetch(`${base}/v2/sandboxes?limit=1`, { headers: key ? { 'x-api-key': key } : {} }).then(async (r) => {
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error(`answered ${r.status}`);
    });
    for (let i = 0; i < 50; i++) { await get(open.url); await get(checking.url, keys[i]); }

    const floor: number[] = [];
    const uncached: number[] = [];
    const cached: number[] = [];
    const hot = keys[KEYS - 1]!;
    for (let r = 0; r < RUNS; r++) {
      floor.push((await timed(() => get(open.url)))[0]);
      // A key not seen in the last second: the gateway asks the master (an indexed look-up among 10,000).
      uncached.push((await timed(() => get(checking.url, keys[(r * 7919) % KEYS])))[0]);
      cached.push((await timed(() => get(checking.url, hot)))[0]);
    }

    // Placeholder resolution, as the egress proxy does it per request.
    const teamId = DEFAULT_TEAM_ID;
    await master.app.inject({ method: 'POST', url: '/secrets', payload: { name: 'bench-secret', value: 'v'.repeat(40) } });
    const sources = { secrets: new SecretResolverClient(master.url, EGRESS_TOKEN), tokens: new IdentityMintClient(master.url, EGRESS_TOKEN) };
    const policy = { sandboxId: 'bench', address: '10.0.0.2', rules: [], teamId };
    const plain = [{ name: 'Authorization', value: 'Bearer literal' }];
    const withSecret = [{ name: 'Authorization', value: 'Bearer ${e2b.secrets.bench-secret}' }];
    const resolver = new PlaceholderResolver(sources);
    const none: number[] = [];
    const hit: number[] = [];
    const miss: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      none.push((await timed(() => resolver.fill(policy, plain)))[0]);
      hit.push((await timed(() => resolver.fill(policy, withSecret)))[0]);
      miss.push((await timed(() => new PlaceholderResolver(sources).fill(policy, withSecret)))[0]);
    }

    // Minting: the issuer itself, and through the master's route (what a cache miss of the proxy costs).
    const mintStart = performance.now();
    let minted = 0;
    for (; performance.now() - mintStart < 2000; minted++) master.identity.mint({ teamId, sandboxId: 'bench', audience: 'sts.amazonaws.com' });
    const mintRate = Math.round(minted / ((performance.now() - mintStart) / 1000));
    const mintRoute: number[] = [];
    const tokens = new IdentityMintClient(master.url, EGRESS_TOKEN);
    await master.db.kysely.insertInto('t_svc_sandbox').values({
      sandbox_id: 'bench', team_id: teamId, iam: JSON.stringify({ aws: { audience: 'sts.amazonaws.com', tokenType: 'JWT-SVID' } }), template_id: 't', alias: null, node_id: 'n1', state: 'running', pause_kind: null,
      address: '10.0.0.2', envd_port: 49983, envd_version: '0', envd_access_token: null, traffic_access_token: null, secure: 0, runtime: 'gvisor', cpu_count: 1, memory_mb: 512,
      disk_size_mb: 2048, metadata: '{}', network: '{}', allow_internet_access: null, on_timeout: 'kill', auto_resume: 0, timeout_sec: -1, end_at: null, started_at: now, created_at: now,
      updated_at: now, terminated_at: null, terminate_reason: null, volume_mounts: '[]', env_vars: null, auto_pause_memory: 1,
    }).execute();
    for (let r = 0; r < RUNS; r++) mintRoute.push((await timed(() => tokens.mint('bench', 'aws')))[0]);

    const latency: Record<string, Stat> = {
      'floor: GET /v2/sandboxes, no key check (ms)': stat(floor),
      [`same, a key among ${KEYS} not seen for 1 s (ms)`]: stat(uncached),
      'same, a key seen in the last second (ms)': stat(cached),
      'egress: headers without placeholders (ms)': stat(none),
      'egress: one secret placeholder, cached (ms)': stat(hit),
      'egress: one secret placeholder, from the master (ms)': stat(miss),
      'mint a workload token through the master route (ms)': stat(mintRoute),
    };
    printTable(`API keys (${KEYS} stored), secret placeholders and workload tokens`, latency);
    const added = {
      uncachedP50Ms: r2(stat(uncached).p50 - stat(floor).p50), uncachedP99Ms: r2(stat(uncached).p99 - stat(floor).p99),
      cachedP50Ms: r2(stat(cached).p50 - stat(floor).p50), cachedP99Ms: r2(stat(cached).p99 - stat(floor).p99),
    };
    console.log(`key verification adds: p50 ${added.uncachedP50Ms} ms / p99 ${added.uncachedP99Ms} ms uncached; p50 ${added.cachedP50Ms} ms / p99 ${added.cachedP99Ms} ms cached`);
    const placeholderUs = { cachedP50: r2((stat(hit).p50 - stat(none).p50) * 1000), fromMasterP50: r2((stat(miss).p50 - stat(none).p50) * 1000) };
    console.log(`a secret placeholder costs an egress request: ${placeholderUs.cachedP50} µs cached, ${placeholderUs.fromMasterP50} µs when fetched (p50)`);
    console.log(`workload tokens minted: ${mintRate}/s by the issuer on one core; ${Math.round(1000 / stat(mintRoute).p50)}/s one at a time through the master route`);
    console.log(`wrote ${writeResult('auth', { keys: KEYS, runs: RUNS, latency, keyCheckAdded: added, placeholderCostUs: placeholderUs, mintPerSec: mintRate, mintRouteP50Ms: stat(mintRoute).p50 })}`);
  } finally {
    await checking.close();
    await open.close();
    await master.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
