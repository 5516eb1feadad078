/**
 * E2B's template builder (issue 18), through the official e2b SDK's `Template.build` on `svc up`:
 *   - a five-step build from `base` (COPY of a 50-file context, ENV, two RUN, and a start command
 *     with waitForPort), each with new RUN text so that no build is cached (the files' upload is,
 *     after the first), its unchanged rebuild (goal: under 5% of the first), and a rebuild with
 *     its last RUN changed (the steps before it come from their cached capture);
 *   - what a RUN step adds over running the same command in a live sandbox (`commands.run`), the
 *     capture it leaves for the cache included;
 *   - a create from the built template (which starts its start command and waits for the port)
 *     against one from `base`, both cold (warm pool off).
 *
 *   node --import tsx bench/template-builds.ts [--n 5]
 * Run as root. Prints a table and writes bench/results/template-builds.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template, waitForPort } from 'e2b';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { printTable, ratio, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('n', 5);
const STEPS = 10;

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

/** A build context of 50 small files (about 200 KB), as an app's sources. */
function context(): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-context-'));
  mkdirSync(join(dir, 'app/lib'), { recursive: true });
  for (let i = 0; i < 50; i++) writeFileSync(join(dir, `app/lib/module${i}.js`), `export const n = ${i};\n${'// padding\n'.repeat(400)}`);
  return dir;
}

const fiveSteps = (tag: string, dir: string, last = 'sha256sum /srv/app/tag.txt > /srv/app/tag.sum') => Template({ fileContextPath: dir }).fromTemplate('base')
  .copy('app', '/srv/app/')
  .setEnvs({ BENCH: tag })
  .runCmd(`echo ${tag} > /srv/app/tag.txt`)
  .runCmd(last)
  .setStartCmd('python3 -m http.server 8000 --directory /srv/app', waitForPort(8000));

/** A build of `steps` RUN steps of `true`: the time it takes over the base build, a step. */
const runSteps = (tag: string, steps: number) => {
  let t = Template().fromTemplate('base').runCmd(`echo ${tag}`);
  for (let i = 1; i < steps; i++) t = t.runCmd('true');
  return t;
};

async function main(): Promise<void> {
  // Each run starts empty: the builds' captures of earlier runs are never swept otherwise.
  rmSync('/tmp/svc-bench-builds', { recursive: true, force: true });
  const p = await startPlatform({ dataDir: '/tmp/svc-bench-builds', env: { SVC_ADDRESS_POOL: '10.214.0.0/16', SVC_WARM_POOL_SIZE: '0', SVC_LOG_LEVEL: 'warn' } });
  platform = p;
  useE2bEnv(p);
  const rows: Record<string, Stat> = {};
  const run = Date.now().toString(36);
  const dir = context();
  try {
    const first: number[] = [];
    const again: number[] = [];
    const lastChanged: number[] = [];
    for (let i = 0; i < N; i++) {
      const t = fiveSteps(`${run}-${i}`, dir);
      first.push((await timed(() => Template.build(t, `bench-five-${run}-${i}`)))[0]);
      again.push((await timed(() => Template.build(t, `bench-five-${run}-${i}`)))[0]);
      lastChanged.push((await timed(() => Template.build(fiveSteps(`${run}-${i}`, dir, 'md5sum /srv/app/tag.txt > /srv/app/tag.sum'), `bench-five-${run}-${i}-changed`)))[0]);
    }
    rows['five-step build from base (ms)'] = stat(first);
    rows['its unchanged rebuild (ms)'] = stat(again);
    rows['a rebuild with its last RUN changed (ms)'] = stat(lastChanged);

    // A RUN step's cost: builds of 1 and of STEPS steps, the difference over the steps added.
    const one: number[] = [];
    const many: number[] = [];
    for (let i = 0; i < N; i++) {
      one.push((await timed(() => Template.build(runSteps(`${run}-one-${i}`, 1), `bench-one-${run}-${i}`)))[0]);
      many.push((await timed(() => Template.build(runSteps(`${run}-many-${i}`, STEPS), `bench-many-${run}-${i}`)))[0]);
    }
    const perStep = many.map((m, i) => (m - one[i]) / (STEPS - 1));
    rows['a RUN step of `true` in a build (ms)'] = stat(perStep);
    const live = await Sandbox.create('base');
    const direct: number[] = [];
    for (let i = 0; i < N * 4; i++) direct.push((await timed(() => live.commands.run('true')))[0]);
    await live.kill();
    rows['the same command in a live sandbox, commands.run (ms)'] = stat(direct);

    // A sandbox of the built template against one of base, both cold.
    const fromBuilt: number[] = [];
    const fromBase: number[] = [];
    for (let i = 0; i < N; i++) {
      for (const [name, into] of [[`bench-five-${run}-0`, fromBuilt], ['base', fromBase]] as const) {
        const [ms, s] = await timed(async () => { const s = await Sandbox.create(name); await s.commands.run('true'); return s; });
        into.push(ms);
        await s.kill();
      }
    }
    rows['create + run(true) from the built template (ms)'] = stat(fromBuilt);
    rows['create + run(true) from base (ms)'] = stat(fromBase);

    const rebuildRatio = ratio(rows['its unchanged rebuild (ms)'].p50, rows['five-step build from base (ms)'].p50);
    const stepOverhead = rows['a RUN step of `true` in a build (ms)'].p50 - rows['the same command in a live sandbox, commands.run (ms)'].p50;
    printTable('template builds, official e2b SDK (Template.build), warm pool off', rows);
    console.log(`unchanged rebuild / first build, p50: ${rebuildRatio}x (goal < 0.05)`);
    console.log(`a RUN step adds ${Math.round(stepOverhead)} ms over commands.run of the same command (p50)`);
    writeResult('template-builds', { n: N, latency: rows, ratios: { rebuildOverFirstP50: rebuildRatio, runStepOverLiveMs: Math.round(stepOverhead) }, goals: { rebuildRatio: 0.05 } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await p.stop();
  }
}

main().catch((err) => {
  console.error(err);
  void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(1));
});
