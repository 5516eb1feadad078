/**
 * The data plane while the platform is busy: proxied latency to a sandbox's port through `svc up`
 * when idle, then while 20 creates run at once (the proxy's workers are processes of their own,
 * off the API's and the master's event loop: docs/design.md, "Proxies on every core").
 *
 *   node --import tsx bench/proxy-burst.ts [--creates 20] [--samples 3000] [--workers N]
 * Run as root. --workers sets proxy.workers (0: one per core). Prints a table and writes
 * bench/results/proxy-burst.json. Goal (issue 37): p99 during the burst at most 2x the idle p99.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { numberArg } from './lib/args.ts';
import { KEEPALIVE_SERVER_ON_8000 } from './lib/sandbox-server.ts';
import { sleep, stat, writeResult } from './lib/stats.ts';
import { endpoint, latencySamples } from './proxy.ts';

const CREATES = numberArg('creates', 20);
const SAMPLES = numberArg('samples', 3000);
const WORKERS = numberArg('workers', 0);
const GOAL_RATIO = 2;
const DATA = '/tmp/svc-bench-burst';

/** The sandbox's own address, from its node record: the floor, without the proxy. */
function addressOf(sandboxId: string): string {
  const dir = join(DATA, 'node', 'instances');
  for (const inst of readdirSync(dir)) {
    const rec = JSON.parse(readFileSync(join(dir, inst, 'record.json'), 'utf8')) as { sandboxId?: string; address: string };
    if (rec.sandboxId === sandboxId) return rec.address;
  }
  throw new Error(`no node record for ${sandboxId}`);
}

async function main(): Promise<void> {
  let p: RunningPlatform | undefined;
  const made: Sandbox[] = [];
  try {
    p = await startPlatform({
      dataDir: DATA,
      // A pool of its own; a warm pool as svc up's default, so the burst is what users see.
      env: { SVC_ADDRESS_POOL: '10.212.0.0/16', SVC_PROXY_WORKERS: String(WORKERS), SVC_WARM_POOL_INITIAL: '8' },
    });
    useE2bEnv(p);
    const target = await Sandbox.create();
    made.push(target);
    await target.commands.run(KEEPALIVE_SERVER_ON_8000);
    const proxied = endpoint('proxy', p.sandboxUrl, '/', { Host: `8000-${target.sandboxId}.${p.domain}` });
    for (let i = 0; i < 100; i++) { if (await latencySamples(proxied, 1).then(() => true, () => { /* the server is not up yet */ return false; })) break; await sleep(100); }
    const address = addressOf(target.sandboxId);
    const direct = endpoint('direct', `http://${address}:8000`, '/', { Host: `${address}:8000` });
    await latencySamples(proxied, 300);
    await latencySamples(direct, 300);
    await sleep(3000); // the warm pool refilled after the first create
    const idle = stat(await latencySamples(proxied, SAMPLES));
    const idleDirect = stat(await latencySamples(direct, SAMPLES));

    // The same loops, proxied and direct in turn, while the creates run; they stop when the last create answered.
    let creating = true;
    const during: number[] = [];
    const duringDirect: number[] = [];
    const loop = (async () => {
      while (creating) {
        during.push(...await latencySamples(proxied, 20));
        duringDirect.push(...await latencySamples(direct, 20));
      }
    })();
    const t0 = performance.now();
    const created = await Promise.allSettled(Array.from({ length: CREATES }, () => Sandbox.create()));
    const burstMs = performance.now() - t0;
    creating = false;
    await loop;
    for (const c of created) if (c.status === 'fulfilled') made.push(c.value);
    const failed = created.filter((c) => c.status === 'rejected').length;
    const busy = stat(during);
    const busyDirect = stat(duringDirect);
    const result = {
      bench: 'proxy-burst', at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadAverage: loadavg(),
      params: { creates: CREATES, samples: SAMPLES, workers: WORKERS || `one per core (${cpus().length})` },
      idleMs: idle, duringBurstMs: busy, direct: { idleMs: idleDirect, duringBurstMs: busyDirect }, burstMs: Math.round(burstMs), createsFailed: failed,
      p99Ratio: Math.round((busy.p99 / idle.p99) * 100) / 100,
      directP99Ratio: Math.round((busyDirect.p99 / idleDirect.p99) * 100) / 100,
      goal: { p99RatioAtMost: GOAL_RATIO, met: busy.p99 / idle.p99 <= GOAL_RATIO },
    };
    console.log(`\nData-plane latency through svc up, idle and during ${CREATES} creates at once (${result.params.workers} proxy workers)`);
    console.log('| phase | path | n | p50 ms | p99 ms | max ms |');
    console.log('|---|---|---|---|---|---|');
    console.log(`| idle | proxied | ${idle.n} | ${idle.p50} | ${idle.p99} | ${idle.max} |`);
    console.log(`| idle | direct (floor) | ${idleDirect.n} | ${idleDirect.p50} | ${idleDirect.p99} | ${idleDirect.max} |`);
    console.log(`| during the burst (${Math.round(burstMs)} ms) | proxied | ${busy.n} | ${busy.p50} | ${busy.p99} | ${busy.max} |`);
    console.log(`| during the burst | direct (floor) | ${busyDirect.n} | ${busyDirect.p50} | ${busyDirect.p99} | ${busyDirect.max} |`);
    console.log(`p99 during / idle: proxied ${result.p99Ratio}x (goal <= ${GOAL_RATIO}x: ${result.goal.met ? 'met' : 'missed'}), direct ${result.directP99Ratio}x${failed ? `; ${failed} creates failed` : ''}`);
    console.log(`wrote ${writeResult('proxy-burst', result)}`);
  } finally {
    await Promise.allSettled(made.map((s) => s.kill()));
    await p?.stop();
  }
}

await main();
