/**
 * Every benchmark the issues name, one after another, then one summary table of the headline
 * figures beside their floors and goals.
 *
 *   npm run bench            (as root; about 20 minutes on 2 cores)
 *   npm run bench -- platform proxy      (a subset)
 *   npm run bench -- --summary           (only the summary, from the results on disk)
 * Each benchmark prints its own table and writes bench/results/<name>.json; this writes
 * bench/results/summary.json.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_ROOT, writeResult } from './lib/stats.ts';

const ALL = ['first-start', 'node-agent', 'platform', 'proxy', 'egress', 'nginx-peer', 'proxy-burst', 'template-center', 'signed-urls', 'density', 'first-creates', 'snapshots', 'template-builds', 'code-interpreter', 'auth', 'volumes', 'events', 'metrics', 'console', 'mcp'];
const chosen = process.argv.slice(2).filter((a) => ALL.includes(a));
const benches = process.argv.includes('--summary') ? [] : chosen.length ? chosen : ALL;

const failed: string[] = [];
for (const b of benches) {
  console.log(`\n===== bench/${b}.ts`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(BENCH_ROOT, `${b}.ts`)], { stdio: 'inherit' });
  if (r.status !== 0) failed.push(b);
}

const read = (name: string): any => {
  const f = join(BENCH_ROOT, 'results', `${name}.json`);
  return existsSync(f) ? JSON.parse(readFileSync(f, 'utf8')) : undefined;
};
const platform = read('platform');
const proxy = read('proxy');
const tc = read('template-center');
const rows: Array<[string, string, string, string]> = [];
const r2 = (v: number | undefined) => (v === undefined ? '?' : String(Math.round(v * 100) / 100));
const lat = (k: string) => platform?.latency?.[k];
if (platform) {
  const cold = lat('create, cold: API call → envd answers (ms)');
  const floor = lat('floor: runsc run → envd answers (ms)');
  rows.push(['create p50 / p95, cold (ms)', `${cold.p50} / ${cold.p95}`, `floor ${floor.p50} / ${floor.p95}`, `≤ 1.25× floor (now ${platform.ratios.coldCreateOverFloorP50}×)`]);
  rows.push(['create p50, warm pool (ms)', String(lat('create, warm pool: API call → envd answers (ms)').p50), '', '≤ 50']);
  rows.push(['pause / resume p50, freeze (ms)', `${lat('pause (freeze) via API (ms)').p50} / ${lat('resume (freeze) via API connect (ms)').p50}`, '', '≤ 300 each']);
  rows.push(["commands.run('echo') p50 (ms)", String(lat("commands.run('echo') via e2b SDK (ms)").p50), `runsc exec ${lat('runsc exec echo (ms)').p50}`, '']);
  rows.push(['memory per idle sandbox (MB)', String(platform.memory.perSandboxMB), `${platform.memory.fitIn24GiB} fit in 24 GiB`, '≤ 30']);
  rows.push(['proxy added p50 / p99 on a sandbox port (ms)', `${platform.proxy.addedP50Ms} / ${platform.proxy.addedP99Ms}`, `direct p50 ${lat('sandbox port, direct (ms)').p50}`, '≤ 0.5 at p50']);
  rows.push(['proxy throughput on a sandbox port', `${platform.proxy.throughputRatio} of direct`, `${platform.proxy.proxiedRps} vs ${platform.proxy.directRps} req/s`, '≥ 0.7']);
  rows.push(['auto-resume p50 (ms)', String(lat('auto-resume: request to a paused sandbox → response (ms)').p50), '', '≤ 300']);
}
if (proxy) {
  rows.push(['proxy added p50 / p99, loopback upstream (ms)', `${r2(proxy.latencyMs.addedP50)} / ${r2(proxy.latencyMs.addedP99)}`, `direct p50 ${r2(proxy.latencyMs.direct.p50)}`, '≤ 0.5 at p50']);
  rows.push(['proxy throughput, loopback upstream', `${r2(proxy.throughputRps.ratio)} of direct`, `${Math.round(proxy.throughputRps.proxy)} vs ${Math.round(proxy.throughputRps.direct)} req/s`, '≥ 0.7']);
}
const egress = read('egress');
if (egress?.httpsKeepAlive) {
  const ka = egress.httpsKeepAlive;
  rows.push(['egress HTTPS keep-alive throughput', `${r2(ka.throughputRatio)} of direct`, `${ka.proxy.rps} vs ${ka.direct.rps} req/s`, '≥ 0.5']);
  rows.push(['egress HTTPS added p50 / p99 (ms)', `${r2(ka.addedP50Ms)} / ${r2(ka.addedP99Ms)}`, `direct p50 ${r2(ka.direct.latencyMs.p50)}`, '≤ 2 at p50']);
}
if (egress?.httpsNewConnections) {
  const nc = egress.httpsNewConnections;
  rows.push(['egress new HTTPS connections/s', String(nc.proxy.rps), `direct ${nc.direct.rps}`, '≥ 1,000']);
}
const nginxPeer = read('nginx-peer');
for (const run of nginxPeer?.runs ?? []) {
  const q = run.ratios;
  rows.push([`data-plane proxy vs nginx, ${run.workers} worker(s): throughput / p50`, `${r2(q.dataPlaneThroughputOfNginx)}× / +${r2(q.dataPlaneP50OverNginxMs)} ms`, 'nginx, same run', '≥ 0.9× / ≤ +0.2 ms']);
  rows.push([`egress vs nginx, ${run.workers} worker(s): keep-alive of direct / CPU`, `${r2(q.egressKeepAliveOfDirect)} / ${r2(q.egressCpuOverNginx)}× nginx`, `nginx ${r2(q.nginxKeepAliveOfDirect)} of direct`, '≥ 0.5 / ≤ 2×']);
  rows.push([`new TLS connections vs nginx, ${run.workers} worker(s)`, `${r2(q.newTlsOfNginx)}× nginx`, 'nginx, same run', '≥ 0.8×']);
}
const burst = read('proxy-burst');
if (burst?.p99Ratio !== undefined) {
  rows.push(['proxied p99 during 20 creates / idle', `${burst.p99Ratio}×`, `direct ${burst.directP99Ratio}×`, '≤ 2×']);
}
const auth = read('auth');
if (auth) {
  const k = auth.keyCheckAdded;
  rows.push([`API key check added p50 / p99, ${auth.keys} keys (ms)`, `${k.uncachedP50Ms} / ${k.uncachedP99Ms}`, `cached ${k.cachedP50Ms} / ${k.cachedP99Ms}`, '']);
  rows.push(['secret placeholder per egress request (µs)', `${auth.placeholderCostUs.cachedP50} cached`, `${auth.placeholderCostUs.fromMasterP50} fetched`, '']);
  rows.push(['workload tokens minted /s', String(auth.mintPerSec), `route p50 ${auth.mintRouteP50Ms} ms`, '']);
}
const vols = read('volumes');
if (vols) {
  const l = vols.latency;
  const attached = r2(l['node agent attach, first on the node (ms)'].p50 + Math.max(0, vols.floorMountAddedP50Ms));
  rows.push(['a volume adds to a create, p50 (ms)', `${attached} (attach + gVisor's mount)`, `end to end ${vols.createAddedP50Ms} (runsc varies ±100)`, '≤ 20']);
  rows.push(['volume mount / host directory, write and read', `${vols.throughput.ratios.write} / ${vols.throughput.ratios.read}`, `${vols.throughput.writeMBps.mount} / ${vols.throughput.readMBps.mount} MB/s`, '≥ 0.5']);
}
if (tc) {
  rows.push(['build base: cold / from cached rootfs (s)', `${r2(tc.baseCold.totalWithMmdebstrapMs / 1000)} / ${r2(tc.baseCached.totalMs / 1000)}`, `mmdebstrap ${r2(tc.baseCold.mmdebstrapMs / 1000)} s`, '']);
  rows.push(['build 3-layer ~100 MB image (s)', r2(tc.image.build.totalMs / 1000), `pull ${r2(tc.image.build.pullMs / 1000)} s`, '']);
  const t = tc.image.throughputMBps ?? {};
  rows.push(['pull MB/s: registry client / build phase', `${r2(t.registryClientOnly)} / ${r2(t.buildPullPhase)}`, `skopeo copy ${r2(t.skopeoCopy)}`, '≥ skopeo']);
}

const firsts = read('first-creates');
if (firsts) {
  const l = Object.values(firsts.latency) as Array<{ p50: number }>;
  rows.push(['first creates, ten in a row / one at a time p50 (ms)', `${r2(l[0]?.p50)} / ${r2(l[1]?.p50)}`, `no pool ${r2(l[2]?.p50)}`, '≤ 100']);
}
const snaps = read('snapshots');
if (snaps) {
  const s = snaps.latency;
  rows.push(['create from snapshot / template p50 (ms)', `${r2(s['create + run(true) from a snapshot (ms)']?.p50)} / ${r2(s['create + run(true) from the template, cold (ms)']?.p50)}`, `${snaps.ratios.createFromSnapshotOverTemplateP50}×`, '≤ 1.2×']);
  rows.push(['filesystem pause / boot from files p50 (ms)', `${r2(s['filesystem pause (ms)']?.p50)} / ${r2(s['connect after it: boot from the files + run(true) (ms)']?.p50)}`, '', '']);
  rows.push(['memory per paused sandbox: freeze / filesystem (MB)', `${snaps.memoryMB['freeze: per paused sandbox (MB)']} / ${snaps.memoryMB['filesystem: per paused sandbox (MB)']}`, '', 'filesystem 0']);
}

const builds = read('template-builds');
if (builds) {
  const b = builds.latency;
  rows.push(['five-step build / unchanged rebuild p50 (ms)', `${r2(b['five-step build from base (ms)']?.p50)} / ${r2(b['its unchanged rebuild (ms)']?.p50)}`, `${builds.ratios.rebuildOverFirstP50}×`, '< 0.05×']);
  rows.push(['a RUN step / commands.run p50 (ms)', `${r2(b['a RUN step of `true` in a build (ms)']?.p50)} / ${r2(b['the same command in a live sandbox, commands.run (ms)']?.p50)}`, `+${builds.ratios.runStepOverLiveMs} ms`, '']);
}

const interpreter = read('code-interpreter');
if (interpreter) {
  const c = interpreter.latency;
  rows.push(["runCode('1+1') p50 / p95 (ms)", `${r2(c["runCode('1+1') through the platform (ms)"]?.p50)} / ${r2(c["runCode('1+1') through the platform (ms)"]?.p95)}`, `floor ${r2(c['floor: jupyter_client → bare ipykernel on the host (ms)']?.p50)}`, '']);
  rows.push(['code interpreter: create → first result p50 (ms)', r2(c["create → first runCode('1+1') result (ms)"]?.p50), '', '']);
}

const events = read('events');
if (events) {
  const e = events.latency;
  rows.push(['webhook delivery after the change p50 (ms)', r2(e['webhook delivery after the change (ms)']?.p50), `p99 ${r2(e['webhook delivery after the change (ms)']?.p99)}`, '≤ 100']);
  rows.push(['recording an event, p50 (ms)', r2(e['created event recorded, one webhook queued (ms)']?.p50), `create ${r2(e['create through the master, fake node (ms)']?.p50)}`, '≤ 1']);
}

const scrape = read('metrics');
if (scrape) {
  const m = Object.values(scrape.latency)[0] as { p50: number; p95: number } | undefined;
  rows.push([`GET /metrics p50 / p95, ${scrape.sandboxes} sandboxes (ms)`, `${r2(m?.p50)} / ${r2(m?.p95)}`, `${scrape.series} series, ${scrape.bodyBytes} bytes`, `≤ ${scrape.goalMs}`]);
}

const web = read('console');
if (web) {
  const w = web.latency;
  rows.push(['console bundle: first load / all, gz (KB)', `${r2(web.bundle.firstLoad.gzipBytes / 1024)} / ${r2(web.bundle.all.gzipBytes / 1024)}`, '', '≤ 300']);
  rows.push(['console: first row of the list p50 (ms)', r2(w['first row painted, 5 sandboxes (ms)']?.p50), `FCP ${r2(w['first contentful paint (ms)']?.p50)}`, '≤ 1000']);
  rows.push(['console: 1,000 rows render / flick (ms, stub)', `${r2(w['1000 rows rendered, stub (ms)']?.p50)} / ${r2(w['1000 rows, a flick to the bottom, stub (ms)']?.p50)}`, '', '≤ 1000']);
  rows.push(['console: terminal echo p50 / p95 (ms)', `${r2(w['terminal echo of a key (ms)']?.p50)} / ${r2(w['terminal echo of a key (ms)']?.p95)}`, '', '≤ 50 p50']);
}
const mcp = read('mcp');
if (mcp) {
  const m = mcp.latency;
  rows.push(["MCP run_command('true') p50 (ms)", r2(m["run_command('true') over MCP HTTP (ms)"]?.p50), `e2b SDK ${r2(m["commands.run('true') via e2b SDK (ms)"]?.p50)} (${mcp.ratios.mcpOverSdkP50}×)`, '≤ 1.3×']);
  rows.push(['Sandbox.create({ mcp }) → tools/list p50 (ms)', r2(m['Sandbox.create({ mcp }) → first tools/list (ms)']?.p50), `plain create ${r2(m['Sandbox.create() of base (ms)']?.p50)}`, '≤ +2000']);
}

console.log('\n===== summary');
const pad = (s: string, n: number) => s.padEnd(n);
for (const [a, b, c, d] of rows) console.log(pad(a, 46) + pad(b, 26) + pad(c, 30) + d);
console.log(`wrote ${writeResult('summary', { when: new Date().toISOString(), benches, failed, rows })}`);
if (failed.length) {
  console.error(`failed: ${failed.join(', ')}`);
  process.exit(1);
}
