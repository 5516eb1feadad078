/**
 * Snapshots, fork and the filesystem pause (issue 10), through the official e2b SDK on `svc up`
 * with the warm pool off (so that a create from a template and one from a snapshot both start
 * cold and compare fairly):
 *   - snapshot time and size against the writable layer's size (0, 10 and 100 MB written);
 *   - create from a snapshot against create from its template, interleaved in one run;
 *   - fork of 1 and of 5;
 *   - filesystem pause, and connect that boots the sandbox again from its files;
 *   - memory each paused sandbox holds on the host, per pause kind (PSS of its runsc processes).
 * Goals: a filesystem-paused sandbox costs 0 MB; create from a snapshot within 1.2x of create
 * from its template.
 *
 *   node --import tsx bench/snapshots.ts [--n 10]
 * Run as root. Prints a table and writes bench/results/snapshots.json.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Sandbox } from 'e2b';
import { MasterClient } from '@svc/contracts/master';
import { clusterHeaders } from '@svc/contracts/cluster-token';
import { loadOrCreateSecrets } from '../packages/cli/src/secrets.ts';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { printTable, ratio, sleep, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('n', 10);
const PAUSED = 5;
const round = (v: number) => Math.round(v * 10) / 10;

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

/** PSS (MB) of every process of this platform's gVisor sandboxes (their runsc root is under the data dir). */
function sandboxPssMB(dataDir: string): number {
  let kb = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${dataDir}/node/runsc`)) continue;
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch { /* the process ended while being read */ }
  }
  return kb / 1024;
}

async function main(): Promise<void> {
  const p = await startPlatform({ dataDir: '/tmp/svc-bench-snapshots', env: { SVC_ADDRESS_POOL: '10.215.0.0/16', SVC_WARM_POOL_SIZE: '0', SVC_LOG_LEVEL: 'warn' } });
  platform = p;
  useE2bEnv(p);
  // The master answers svc up's cluster_token only.
  const master = new MasterClient(`http://${p.env.SVC_MASTER_LISTEN}`, { headers: clusterHeaders(loadOrCreateSecrets(p.dataDir).cluster_token) });
  const rows: Record<string, Stat> = {};
  const sizes: Array<{ writtenMB: number; layerUsedMB: number; snapshotMB: number; snapshotMs: number }> = [];
  try {
    // ---- snapshot time and size against what the sandbox wrote
    const origin = await Sandbox.create('base', { timeoutMs: 3_600_000 });
    let written = 0;
    for (const mb of [0, 10, 100]) {
      if (mb > written) await origin.commands.run(`head -c ${(mb - written) * 1024 * 1024} /dev/urandom > /home/user/data-${mb}.bin`);
      written = mb;
      const used = (await origin.getMetrics()).at(-1)?.diskUsed ?? 0;
      const [ms, snap] = await timed(() => origin.createSnapshot());
      const rec = (await master.listSnapshots({ name: snap.snapshotId })).snapshots[0];
      sizes.push({ writtenMB: mb, layerUsedMB: round(used / 1048576), snapshotMB: round(rec.sizeBytes / 1048576), snapshotMs: Math.round(ms) });
      if (mb < 100) await Sandbox.deleteSnapshot(snap.snapshotId);
    }
    const snapshotMs: number[] = [];
    for (let i = 0; i < N; i++) {
      const [ms, snap] = await timed(() => origin.createSnapshot());
      snapshotMs.push(ms);
      await Sandbox.deleteSnapshot(snap.snapshotId);
    }
    rows['snapshot of a sandbox holding 100 MB written (ms)'] = stat(snapshotMs);

    // ---- create from a snapshot against create from the template, interleaved
    const small = await Sandbox.create('base', { timeoutMs: 3_600_000 });
    await small.files.write('/home/user/note.txt', 'from the snapshot');
    const snap = await small.createSnapshot({ name: 'bench-snap' });
    const fromTemplate: number[] = [];
    const fromSnapshot: number[] = [];
    for (let i = 0; i < N; i++) {
      for (const [ref, into] of [['base', fromTemplate], [snap.snapshotId, fromSnapshot]] as const) {
        const [ms, s] = await timed(async () => {
          const s = await Sandbox.create(ref);
          await s.commands.run('true');
          return s;
        });
        into.push(ms);
        await s.kill();
      }
    }
    rows['create + run(true) from the template, cold (ms)'] = stat(fromTemplate);
    rows['create + run(true) from a snapshot (ms)'] = stat(fromSnapshot);

    // ---- fork of 1 and of 5
    for (const count of [1, 5]) {
      const ms: number[] = [];
      for (let i = 0; i < 3; i++) {
        const [t, forks] = await timed(() => Sandbox.fork(small.sandboxId, { count }));
        ms.push(t);
        for (const f of forks) if (f instanceof Sandbox) await f.kill();
      }
      rows[`fork of ${count} (ms)`] = stat(ms);
    }

    // ---- filesystem pause, and the connect that boots it again
    const pauseMs: number[] = [];
    const rebootMs: number[] = [];
    for (let i = 0; i < N; i++) {
      pauseMs.push((await timed(() => small.pause({ keepMemory: false })))[0]);
      rebootMs.push((await timed(async () => (await Sandbox.connect(small.sandboxId)).commands.run('true')))[0]);
    }
    rows['filesystem pause (ms)'] = stat(pauseMs);
    rows['connect after it: boot from the files + run(true) (ms)'] = stat(rebootMs);
    await small.kill();
    await origin.kill();

    // ---- memory a paused sandbox holds, per kind: five sandboxes, each holding 64 MB it wrote
    const memory: Record<string, number> = {};
    for (const kind of ['freeze', 'filesystem'] as const) {
      const held: Sandbox[] = [];
      for (let i = 0; i < PAUSED; i++) {
        const s = await Sandbox.create('base', { timeoutMs: 3_600_000 });
        await s.commands.run("nohup python3 -c 'import os, time; x = os.urandom(64 << 20); time.sleep(100000)' >/dev/null 2>&1 &");
        held.push(s);
      }
      await sleep(3_000);
      const running = sandboxPssMB(p.dataDir);
      for (const s of held) await s.pause(kind === 'freeze' ? {} : { keepMemory: false });
      await sleep(2_000);
      memory[`${kind}: per paused sandbox (MB)`] = round(sandboxPssMB(p.dataDir) / PAUSED);
      memory[`${kind}: per sandbox while running (MB)`] = round(running / PAUSED);
      for (const s of held) await s.kill();
      await sleep(2_000);
    }

    printTable('snapshots, fork and the filesystem pause, official e2b SDK, warm pool off', rows);
    console.log('snapshot time and size by what the sandbox wrote:');
    for (const s of sizes) console.log(`  wrote ${s.writtenMB} MB: layer holds ${s.layerUsedMB} MB, snapshot ${s.snapshotMB} MB, taken in ${s.snapshotMs} ms`);
    console.log('memory held on the host (PSS of the sandboxes\' runsc processes):', JSON.stringify(memory));
    const createRatio = ratio(rows['create + run(true) from a snapshot (ms)'].p50, rows['create + run(true) from the template, cold (ms)'].p50);
    console.log(`create from a snapshot / from the template, p50: ${createRatio}x (goal <= 1.2x)`);
    console.log(`wrote ${writeResult('snapshots', { n: N, latency: rows, sizes, memoryMB: memory, ratios: { createFromSnapshotOverTemplateP50: createRatio }, goals: { filesystemPausedMB: 0, createRatio: 1.2 } })}`);
  } finally {
    await p.stop();
    platform = undefined;
  }
}

await main();
