import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { StartRequestSchema, StartResponseSchema } from '@svc/contracts/envd/process/process_pb';
import { encode, openStream } from './testing/connect-client.ts';
import { envdBundle } from './testing/envd-process.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
let root: string | undefined;
after(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

/**
 * The layout the node agent gives a sandbox: the bundle at /.svc/envd.mjs and node-pty in
 * /.svc/node_modules. Here it sits in a temporary directory with no other node_modules above
 * it, so terminals only work if the bundle resolves node-pty from beside itself.
 */
test('the bundle runs on its own and loads node-pty from the node_modules beside it', async () => {
  root = await mkdtemp(join(tmpdir(), 'envd-layout-'));
  const svc = join(root, '.svc');
  await mkdir(join(svc, 'node_modules', '@lydell'), { recursive: true });
  await cp(await envdBundle(), join(svc, 'envd.mjs'));
  for (const pkg of ['node-pty', 'node-pty-linux-x64']) {
    await cp(join(repoRoot, 'node_modules', '@lydell', pkg), join(svc, 'node_modules', '@lydell', pkg), { recursive: true, dereference: true });
  }

  const started = performance.now();
  const child = spawn(process.execPath, [join(svc, 'envd.mjs')], {
    cwd: '/',
    env: { PATH: process.env.PATH, ENVD_PORT: '0', ENVD_HOST: '127.0.0.1', ENVD_DEFAULT_USER: 'root', ENVD_METADATA_FILE: join(root, 'meta.json') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let output = '';
    const port = await new Promise<number>((resolvePort, reject) => {
      child.stdout!.on('data', (d) => {
        output += d;
        const match = /listening on [^:]+:(\d+)/.exec(output);
        if (match) resolvePort(Number(match[1]));
      });
      child.on('exit', (code) => reject(new Error(`envd exited with ${code}: ${output}`)));
    });
    const listeningMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, 500));
    const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
    const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]);
    console.log(`envd bundle: listening after ${listeningMs.toFixed(0)} ms; idle RSS ${(kib('VmRSS') / 1024).toFixed(1)} MiB (anonymous ${(kib('RssAnon') / 1024).toFixed(1)} MiB, file-backed ${(kib('RssFile') / 1024).toFixed(1)} MiB)`);

    let screen = '';
    let end = 'no end event';
    const request = encode(StartRequestSchema, { process: { cmd: '/bin/sh', args: ['-c', 'tty; echo cols=$(stty size)'] }, pty: { size: { cols: 91, rows: 17 } } }, false);
    for await (const message of openStream(`http://127.0.0.1:${port}/process.Process/Start`, StartResponseSchema, request, {}, false)) {
      const event = message.event!.event;
      if (event.case === 'data' && event.value.output.case === 'pty') screen += Buffer.from(event.value.output.value).toString();
      if (event.case === 'end') end = `end: exit code ${event.value.exitCode}, status ${event.value.status}`;
    }
    assert.match(screen, /\/dev\/pts\/\d+/, end);
    assert.match(screen, /cols=17 91/, `${JSON.stringify(screen)} then ${end}`);
  } finally {
    child.kill();
  }
});
