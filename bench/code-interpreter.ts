/**
 * The code interpreter (issue 11), through the official @e2b/code-interpreter SDK on `svc up`:
 *   - `runCode('1+1')` round trip through the platform (proxy → the service in the sandbox →
 *     the Jupyter kernel and back), against the floor: the same execute sent straight to a bare
 *     ipykernel on the host by Jupyter's own client (jupyter_client), and against our service
 *     on the host without a sandbox or proxy;
 *   - create to the first result: `Sandbox.create()` of code-interpreter-v1 and `runCode('1+1')`,
 *     cold (the template has no warm pool; each sandbox starts its kernels).
 *
 *   node --import tsx bench/code-interpreter.ts [--n 40]
 * Run as root. Prints a table and writes bench/results/code-interpreter.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from '@e2b/code-interpreter';
import { createCodeInterpreter } from '../packages/code-interpreter/src/index.ts';
import { startPlatform, useE2bEnv, type RunningPlatform } from '../test/e2e/harness.ts';
import { printTable, ratio, stat, timed, writeResult, type Stat } from './lib/stats.ts';
import { numberArg } from './lib/args.ts';

const N = numberArg('n', 40);
const CREATES = Math.max(3, Math.round(N / 8));

let platform: RunningPlatform | undefined;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => { void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(130)); });
}

/** The floor: Jupyter's own client sends `1+1` to a bare ipykernel on the host, N times (ms each). */
function kernelFloor(n: number): number[] {
  const script = [
    'import sys, time, json',
    'from jupyter_client.manager import start_new_kernel',
    'km, kc = start_new_kernel(kernel_name="python3")',
    'kc.execute_interactive("1+1", output_hook=lambda m: None)',
    'out = []',
    `for _ in range(${n}):`,
    '    t = time.perf_counter()',
    '    kc.execute_interactive("1+1", output_hook=lambda m: None)',
    '    out.append((time.perf_counter() - t) * 1000)',
    'kc.stop_channels(); km.shutdown_kernel(now=True)',
    'print(json.dumps(out))',
  ].join('\n');
  const r = spawnSync('/usr/bin/python3', ['-c', script], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`the jupyter_client floor failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as number[];
}

/** Our service on the host, no sandbox and no proxy: `1+1` through /execute, N times. */
async function serviceOnHost(n: number): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-ci-'));
  // envd's /envs as an unsecured sandbox's envd answers it: the service asks it before each run (its access check).
  const envd = createServer((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{}'); });
  await new Promise<void>((r) => envd.listen(0, '127.0.0.1', r));
  const ci = createCodeInterpreter({ log: () => {}, defaultCwd: dir, envdEnvsUrl: `http://127.0.0.1:${(envd.address() as { port: number }).port}/envs` });
  await new Promise<void>((r) => ci.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(ci.server.address() as { port: number }).port}/execute`;
  const once = async () => {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: '1+1' }) });
    const text = await res.text();
    if (!text.includes('end_of_execution')) throw new Error(`no end of execution: ${text}`);
  };
  try {
    await ci.warmUp();
    await once();
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await timed(once))[0]);
    return out;
  } finally {
    await ci.close();
    envd.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const rows: Record<string, Stat> = {};
  rows['floor: jupyter_client → bare ipykernel on the host (ms)'] = stat(kernelFloor(N));
  rows['our service on the host, no sandbox (ms)'] = stat(await serviceOnHost(N));

  const p = await startPlatform({ dataDir: '/tmp/svc-bench-code-interpreter', env: { SVC_CODE_INTERPRETER_TEMPLATE: 'true', SVC_ADDRESS_POOL: '10.213.0.0/16', SVC_LOG_LEVEL: 'warn' } });
  platform = p;
  useE2bEnv(p);
  try {
    const sbx = await Sandbox.create({ timeoutMs: 600_000 });
    try {
      await sbx.runCode('1+1');
      const through: number[] = [];
      for (let i = 0; i < N; i++) through.push((await timed(() => sbx.runCode('1+1')))[0]);
      rows["runCode('1+1') through the platform (ms)"] = stat(through);
    } finally {
      await sbx.kill();
    }
    const first: number[] = [];
    const createOnly: number[] = [];
    for (let i = 0; i < CREATES; i++) {
      const start = Date.now();
      const s = await Sandbox.create({ timeoutMs: 120_000 });
      createOnly.push(Date.now() - start);
      const r = await s.runCode('1+1');
      first.push(Date.now() - start);
      if (r.text !== '2') throw new Error(`unexpected result ${JSON.stringify({ text: r.text, error: r.error })}`);
      await s.kill();
    }
    rows['Sandbox.create() of code-interpreter-v1 (ms)'] = stat(createOnly);
    rows["create → first runCode('1+1') result (ms)"] = stat(first);
  } finally {
    await p.stop();
  }
  const overFloor = ratio(rows["runCode('1+1') through the platform (ms)"].p50, rows['floor: jupyter_client → bare ipykernel on the host (ms)'].p50);
  printTable('code interpreter, official @e2b/code-interpreter SDK', rows);
  console.log(`runCode through the platform / floor, p50: ${overFloor}x`);
  writeResult('code-interpreter', { n: N, creates: CREATES, latency: rows, ratios: { runCodeOverFloorP50: overFloor } });
}

main().catch((err) => {
  console.error(err);
  void (platform?.stop() ?? Promise.resolve()).finally(() => process.exit(1));
});
