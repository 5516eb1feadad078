/**
 * The service as it runs in a sandbox: bundled as `npm run build` bundles it, started on its own
 * in a directory with no node_modules, driven over HTTP. Catches what only the bundle gets wrong
 * (the JavaScript host's source is a function of the bundle, run by another process).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { build } from 'esbuild';
import { NODE_BUNDLE } from '../../../scripts/bundle-options.mjs';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
let dir: string | undefined;
let child: ChildProcess | undefined;
// envd's /envs as an unsecured sandbox's envd answers it: the service asks it before each run (access.ts).
const envd = createHttpServer((_req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{}'); });
after(async () => {
  envd.close();
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

test('the bundle serves python, javascript and bash executions on its own', async () => {
  dir = await mkdtemp(join(tmpdir(), 'code-interpreter-bundle-'));
  const outfile = join(dir, 'code-interpreter.mjs');
  await build({ ...NODE_BUNDLE, entryPoints: [join(repoRoot, 'packages/code-interpreter/src/main.ts')], outfile });
  const port = await freePort();
  await new Promise<void>((r) => envd.listen(0, '127.0.0.1', r));
  const envdEnvsUrl = `http://127.0.0.1:${(envd.address() as { port: number }).port}/envs`;
  let output = '';
  child = spawn(process.execPath, [outfile], {
    cwd: dir,
    env: { ...process.env, SVC_CODE_INTERPRETER_PORT: String(port), SVC_CODE_INTERPRETER_HOST: '127.0.0.1', SVC_CODE_INTERPRETER_CWD: dir, SVC_CODE_INTERPRETER_ENVD_ENVS_URL: envdEnvsUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { output += d.toString(); });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/health`).then((r) => r.ok, () => { /* not listening yet: poll again */ return false; });
    if (ok) break;
    assert.ok(i < 100, `the bundle did not listen: ${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const line of output.trim().split('\n')) assert.doesNotThrow(() => JSON.parse(line), `a JSON log line: ${line}`);

  const run = async (body: Record<string, unknown>) => {
    const res = await fetch(`${base}/execute`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(res.status, 200);
    return (await res.text()).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  };
  const main = (lines: Record<string, unknown>[]) => lines.find((l) => l.type === 'result' && l.is_main_result)?.text;
  assert.equal(main(await run({ code: '6 * 7' })), '42');
  assert.equal(main(await run({ code: 'const n: number = 20; n + 1', language: 'typescript' })), '21', output);
  const bash = await run({ code: 'echo "in $PWD"', language: 'bash' });
  assert.equal(bash.find((l) => l.type === 'stdout')?.text, `in ${dir}\n`);
});
