/**
 * The cluster (issue 15, docs/cluster.md) on one machine: two masters on PostgreSQL with Redis,
 * an API gateway, a proxy, a template center and two node agents, each a process of its own
 * (test/e2e/cluster-harness.ts). Measures:
 *   - create throughput (creates per second) and latency p50/p95 at concurrency 20 through the
 *     API and our SDK, with one node agent (every create selects zone=a) against two, in one run;
 *   - the master's scheduling time per create (NodeRegistry.pick on the cluster's database);
 *   - the time from a node agent's SIGKILL to its running sandbox reported lost, at the default
 *     master.node_lost_after_sec (30 s);
 *   - cross-node restore: a pause without memory that stores its package, and the connect that
 *     resumes it on the other node once its node is dead, against a resume on its own node.
 *
 *   eval "$(scripts/test-services.sh start)"; node --import tsx bench/cluster.ts [--n 40]
 * Run as root after `npm run build`. Prints a table and writes bench/results/cluster.json.
 */
import { Sandbox } from '@svc/sdk';
import { availableTestDatabases } from '@svc/master/testing/test-databases';
import { NodeRegistry, openDatabase } from '@svc/master/testing/scheduling';
import { Cluster, json } from '../test/e2e/cluster-harness.ts';
import { waitFor } from '../test/e2e/harness.ts';
import { numberArg } from './lib/args.ts';
import { printTable, stat, timed, writeResult, type Stat } from './lib/stats.ts';

const N = numberArg('n', 40);
const CONCURRENCY = 20;
const round = (v: number) => Math.round(v * 100) / 100;

const postgres = availableTestDatabases().find((d) => d.driver === 'postgres');
if (!postgres?.create) throw new Error('bench/cluster.ts needs PostgreSQL and Redis: eval "$(scripts/test-services.sh start)"');
const db = await postgres.create();
const cluster = await Cluster.start({ dir: '/tmp/svc-bench-cluster', db, nodeMemoryMB: 0, nodeLostAfterSec: 30 });
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => { void cluster.stop().finally(() => process.exit(130)); });

/** N creates, CONCURRENCY at a time; every sandbox killed afterwards. */
async function burst(selector: Record<string, string> | undefined): Promise<{ latency: Stat; perSecond: number; failed: number }> {
  const made: Sandbox[] = [];
  const samples: number[] = [];
  let failed = 0;
  let next = 0;
  const started = Date.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < N) {
      next++;
      try {
        const [ms, sbx] = await timed(() => Sandbox.create('base', { ...cluster.conn, ...(selector ? { nodeSelector: selector } : {}) }));
        samples.push(ms);
        made.push(sbx);
      } catch (err) {
        failed++;
        console.error(`create failed: ${(err as Error).message}`);
      }
    }
  }));
  const wallS = (Date.now() - started) / 1000;
  await Promise.all(made.map((s) => s.kill().catch((err: Error) => console.error(`kill failed: ${err.message}`))));
  return { latency: stat(samples), perSecond: round(samples.length / wallS), failed };
}

try {
  const one = await burst({ zone: 'a' });
  const two = await burst(undefined);

  // Scheduling: the master's choice among the live nodes, on the cluster's own database.
  const conn = await openDatabase(db.config);
  const registry = new NodeRegistry(conn.kysely);
  const pickMs: number[] = [];
  for (let i = 0; i < 200; i++) pickMs.push((await timed(() => registry.pick({ memoryMB: 256, cpuCount: 1 })))[0]);
  await conn.close();

  // Cross-node restore: sandboxes paused (files only: gVisor) with their package stored. Those on
  // node b resume on node a once b is dead; those on node a resume where they are, for comparison.
  // Placed by draining the other (empty) node meanwhile, not by a selector: a move keeps to one.
  const K = 5;
  const pauseStoreMs: number[] = [];
  const sameNodeResumeMs: number[] = [];
  const onB: string[] = [];
  for (const [zone, other] of [['a', 'b'], ['b', 'a']] as const) {
    await json(`${cluster.master('A')}/v1/nodes/node-${other}/drain`, { method: 'POST', body: '{}' });
    const made: Sandbox[] = [];
    try {
      for (let i = 0; i < K; i++) made.push(await Sandbox.create('base', cluster.conn));
    } finally {
      await json(`${cluster.master('A')}/v1/nodes/node-${other}/drain`, { method: 'DELETE' });
    }
    for (const [i, sbx] of made.entries()) {
      await sbx.files.write('/home/user/state.txt', `sandbox ${i}`);
      pauseStoreMs.push((await timed(() => sbx.pause({ keepMemory: false })))[0]);
      if (zone === 'b') { onB.push(sbx.sandboxId); continue; }
      sameNodeResumeMs.push((await timed(() => Sandbox.connect(sbx.sandboxId, cluster.conn)))[0]);
      await sbx.kill();
    }
  }

  // A dead node: its running sandbox reported lost.
  const victim = await Sandbox.create('base', { ...cluster.conn, nodeSelector: { zone: 'b' } });
  const killedAt = Date.now();
  cluster.killNode('b');
  await waitFor('the sandbox reported lost', async () => ((await json(`${cluster.master('A')}/v1/sandboxes/${victim.sandboxId}`)).status === 410 ? true : undefined), 120_000);
  const detectMs = Date.now() - killedAt;
  const crossNodeResumeMs: number[] = [];
  for (const id of onB) {
    const [ms, back] = await timed(() => Sandbox.connect(id, cluster.conn));
    if ((await back.files.read('/home/user/state.txt')).startsWith('sandbox ')) crossNodeResumeMs.push(ms);
    else console.error(`sandbox ${id} resumed without its file`);
    await back.kill();
  }
  cluster.restartNode('b');
  await waitFor('node b back with nothing of the lost sandbox', async () => {
    const r = await json<unknown[]>(`${cluster.nodeUrl('b')}/v1/sandboxes`);
    return r.status === 200 && r.body.length === 0 ? true : undefined;
  }, 60_000);

  const rows: Record<string, Stat> = {
    [`create via API, 1 node, concurrency ${CONCURRENCY} (ms)`]: one.latency,
    [`create via API, 2 nodes, concurrency ${CONCURRENCY} (ms)`]: two.latency,
    'master scheduling (NodeRegistry.pick, PostgreSQL) (ms)': stat(pickMs),
    'pause without memory, package stored (ms)': stat(pauseStoreMs),
    'resume on its own node (connect, boots from its files) (ms)': stat(sameNodeResumeMs),
    'resume on another node, its node dead (connect) (ms)': stat(crossNodeResumeMs),
  };
  printTable(`cluster on one 2-core machine: 2 masters (PostgreSQL + Redis), ${N} creates per run`, rows);
  console.log(`\nthroughput: 1 node ${one.perSecond} creates/s (${one.failed} failed), 2 nodes ${two.perSecond} creates/s (${two.failed} failed)`);
  console.log(`dead node detected: ${detectMs} ms after SIGKILL (master.node_lost_after_sec 30, sweep every 5 s)`);
  console.log(`wrote ${writeResult('cluster', {
    n: N, concurrency: CONCURRENCY, latency: rows,
    throughputPerSecond: { oneNode: one.perSecond, twoNodes: two.perSecond }, failed: { oneNode: one.failed, twoNodes: two.failed },
    deadNodeDetectedMs: detectMs, nodeLostAfterSec: 30, crossNodeResumed: crossNodeResumeMs.length, crossNodeOf: onB.length,
    note: 'both node agents share the one 2-core machine: a second node adds no CPU, so throughput measures the control path, not scale-out',
  })}`);
} finally {
  await cluster.stop();
}
