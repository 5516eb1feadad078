/**
 * Fast out of the box (issue 9): on a fresh `svc up` with its defaults (a warm pool that starts
 * at 8 a template and grows with demand), ten sequential `Sandbox.create('base')` + `commands.run('true')` through
 * the official e2b SDK, as a new user's first script does, then ten more one at a time (3 s
 * apart, the pool refilled between them). Goal: p50 <= 100 ms. The floor beside it is the same
 * on a platform without a warm pool (every create cold).
 *
 *   node --import tsx bench/first-creates.ts [--n 10] [--pool K]
 * Run as root. Prints a table and writes bench/results/first-creates.json.
 */
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { defaultConfig } from '@svc/common';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { loadOrCreateSecrets } from '../packages/cli/src/secrets.ts';
import { printTable, stat, timed, writeResult } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('n', 10);
/** --pool K: start with K warm sandboxes a template instead of svc up's default (warm_pool_initial). */
const POOL = numberArg('pool', 0);
const NETWORK = { SVC_ADDRESS_POOL: '10.214.0.0/16' };

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

async function createAndRun(made: Sandbox[]): Promise<number> {
  const [t] = await timed(async () => {
    const sbx = await Sandbox.create('base');
    made.push(sbx);
    await sbx.commands.run('true');
  });
  return t;
}

async function firstCreates(env: Record<string, string>, spaced: boolean): Promise<{ ms: number[]; spacedMs: number[]; pool: unknown }> {
  const p = await startPlatform({ dataDir: '/tmp/svc-bench-first-creates', env: { ...NETWORK, SVC_LOG_LEVEL: 'warn', ...env } });
  platform = p;
  useE2bEnv(p);
  const made: Sandbox[] = [];
  try {
    const ms: number[] = [];
    for (let i = 0; i < N; i++) ms.push(await createAndRun(made));
    const headers = { [NODE_TOKEN_HEADER]: loadOrCreateSecrets(p.dataDir).node_agent_token };
    const node = await (await fetch(`http://${p.env.SVC_NODE_AGENT_LISTEN}/v1/node`, { headers })).json() as { warmPool?: unknown };
    // The same, one at a time as an agent that creates a sandbox now and then does: each create
    // after the pool has refilled (a few seconds apart), its sandbox killed before the next.
    const spacedMs: number[] = [];
    if (spaced) {
      for (const s of made.splice(0)) await s.kill().catch(() => { /* best effort: the sandbox may already be gone; the platform's stop removes the rest */ return false; });
      for (let i = 0; i < N; i++) {
        await new Promise((r) => setTimeout(r, 3_000));
        spacedMs.push(await createAndRun(made));
        await made.pop()!.kill().catch(() => { /* best effort: the sandbox may already be gone; the platform's stop removes the rest */ return false; });
      }
    }
    return { ms, spacedMs, pool: node.warmPool };
  } finally {
    for (const s of made) await s.kill().catch(() => { /* best effort: the sandbox may already be gone; the platform's stop removes the rest */ return false; });
    await p.stop();
    platform = undefined;
  }
}

const initial = POOL || defaultConfig().node_agent.warm_pool_initial;
const withPool = await firstCreates({ SVC_WARM_POOL_INITIAL: String(initial), SVC_WARM_POOL_MAX: String(Math.max(8, initial)) }, true);
const cold = await firstCreates({ SVC_WARM_POOL_SIZE: '0' }, false);
const rows = {
  [`${POOL ? `pool ${POOL}` : 'svc up defaults'}: create + run('true'), ${N} in a row (ms)`]: stat(withPool.ms),
  [`${POOL ? `pool ${POOL}` : 'svc up defaults'}: create + run('true'), one at a time, 3 s apart (ms)`]: stat(withPool.spacedMs),
  [`floor, no warm pool: create + run('true') (ms)`]: stat(cold.ms),
};
printTable('first creates on a fresh svc up, official e2b SDK', rows);
console.log('in a row (ms):', withPool.ms.map(Math.round).join(' '));
console.log('one at a time (ms):', withPool.spacedMs.map(Math.round).join(' '));
console.log('warm pool after the ten in a row:', JSON.stringify(withPool.pool));
console.log(`wrote ${writeResult(POOL ? `first-creates-pool${POOL}` : 'first-creates', { warmPoolSize: POOL || 'default', n: N, latency: rows, samplesMs: withPool.ms, spacedSamplesMs: withPool.spacedMs, coldSamplesMs: cold.ms, warmPool: withPool.pool, goalP50Ms: 100 })}`);
