/**
 * A new user's first start (issue 32): `svc up --demo` on an empty data directory, timed from
 * the command to "svc is up" and to the demo's end, with the machine-wide `base` image cold
 * (mmdebstrap runs) and warm (`scripts/setup.sh` made it with `svc prepare`, or an earlier data
 * directory did). Beside them, the floor of the cold case: mmdebstrap of `base` into a directory
 * alone, from the same run. The code-interpreter-v1 template builds after the demo in the
 * background and is not waited for (it is measured by bench/code-interpreter.ts).
 *
 *   node --import tsx bench/first-start.ts [--skip-cold]
 * Run as root. The cold case moves the cached base image and tarball aside for its run and puts
 * them back (or keeps the image it made). Prints a table and writes bench/results/first-start.json.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ensureDebianImage } from '@svc/template-center';
import { makeDebianTree } from '../packages/template-center/src/base-template.ts';
import { REPO, SVC_BIN } from '../test/e2e/harness.ts';
import { writeResult } from './lib/stats.ts';

const CACHE = '/var/cache/svc';
const ASIDE = '/var/cache/svc-bench-aside';
/** Ports and addresses of its own, so a developer's `svc up` keeps running beside it. */
const ENV = {
  SVC_API_LISTEN: '127.0.0.1:23000', SVC_MASTER_LISTEN: '127.0.0.1:28089', SVC_NODE_AGENT_LISTEN: '127.0.0.1:28088',
  SVC_PROXY_HTTP_PORT: '23002', SVC_PROXY_ADMIN_PORT: '28082', SVC_TEMPLATE_CENTER_LISTEN: '127.0.0.1:28090',
  SVC_LIFECYCLE_LISTEN: '127.0.0.1:28083', SVC_ADDRESS_POOL: '10.216.0.0/16', SVC_EGRESS_HTTP_PORT: '28180',
  SVC_EGRESS_HTTPS_PORT: '28443', SVC_EGRESS_ADMIN_PORT: '29091',
};

interface FirstStart {
  /** Seconds from the command to each milestone line. */
  rootfsMadeS?: number;
  baseBuiltS?: number;
  upS: number;
  demoEndS: number;
  demoSteps: string[];
}

/** One `svc up --demo` on a new data directory, stopped (Ctrl+C) once its demo ended. */
async function firstStart(dataDir: string): Promise<FirstStart> {
  rmSync(dataDir, { recursive: true, force: true });
  const t0 = performance.now();
  const at = () => Math.round((performance.now() - t0) / 100) / 10;
  const child = spawn(process.execPath, [SVC_BIN, 'up', '--demo', '--data-dir', dataDir], { cwd: REPO, env: { ...process.env, ...ENV }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => { stderr += d; });
  const out: Partial<FirstStart> = { demoSteps: [] };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no demo after 15 minutes\n${stderr}`)), 900_000);
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`svc up exited with ${code}\n${stderr}`)); });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (/base template: image made/.test(line)) out.rootfsMadeS = at();
      if (/base template: BUILT/.test(line)) out.baseBuiltS = at();
      if (line === 'svc is up.') out.upS = at();
      if (/^ {2}\S.*\(\d+ ms\)$/.test(line)) out.demoSteps!.push(line.trim());
      if (/demo failed/.test(line)) { clearTimeout(timer); reject(new Error(line)); }
      if (line === 'Press Ctrl+C to stop.') { out.demoEndS = at(); clearTimeout(timer); resolve(); }
    });
  });
  child.removeAllListeners('exit');
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGINT');
  await exited;
  rmSync(dataDir, { recursive: true, force: true });
  return out as FirstStart;
}

/** What makes a start warm: the base image (and its description), and the tarball it would be unpacked from. */
function baseCaches(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((n) => /^base-rootfs-.*\.tar$|^base-image-.*\.ext4(\.json)?$/.test(n)) : [];
}

/** The cold case: no cached base image or tarball for its run. */
async function coldFirstStart(): Promise<{ start: FirstStart; mmdebstrapAloneS: number }> {
  mkdirSync(ASIDE, { recursive: true });
  for (const n of baseCaches(CACHE)) renameSync(join(CACHE, n), join(ASIDE, n));
  const tree = `/tmp/svc-bench-first-start-tree-${process.pid}`;
  try {
    const start = await firstStart('/tmp/svc-bench-first-start-cold');
    // The floor: mmdebstrap into a directory alone, as the cold start ran it.
    const t0 = performance.now();
    await makeDebianTree(tree, { flavor: 'base' });
    return { start, mmdebstrapAloneS: Math.round((performance.now() - t0) / 100) / 10 };
  } finally {
    rmSync(tree, { recursive: true, force: true });
    // What the run made is as good as what was aside; an interrupted run gets its old one back.
    for (const n of baseCaches(ASIDE)) {
      if (existsSync(join(CACHE, n))) rmSync(join(ASIDE, n));
      else renameSync(join(ASIDE, n), join(CACHE, n));
    }
  }
}

const cold = process.argv.includes('--skip-cold') ? undefined : await coldFirstStart();
// The warm case needs the image: made here if the cold case was skipped and none is cached.
await ensureDebianImage({ flavor: 'base' });
const warm = await firstStart('/tmp/svc-bench-first-start-warm');

const rows: Array<[string, string, string]> = [];
if (cold) {
  rows.push(['cold cache: to "svc is up" (s)', String(cold.start.upS), `mmdebstrap of base alone ${cold.mmdebstrapAloneS} s`]);
  rows.push(['cold cache: to the demo\'s end (s)', String(cold.start.demoEndS), `image made at ${cold.start.rootfsMadeS} s`]);
}
rows.push(['warm cache, new data dir: to "svc is up" (s)', String(warm.upS), 'goal ≤ 15']);
rows.push(['warm cache, new data dir: to the demo\'s end (s)', String(warm.demoEndS), `base built at ${warm.baseBuiltS} s`]);
console.log('\nfirst start of `svc up --demo` on an empty data directory (2 cores)');
for (const [a, b, c] of rows) console.log(`${a.padEnd(52)}${b.padEnd(10)}${c}`);
console.log(`demo steps (warm): ${warm.demoSteps.join('; ')}`);
console.log(`wrote ${writeResult('first-start', { when: new Date().toISOString(), cold, warm })}`);
