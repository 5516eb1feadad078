import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { ConfigError, defaultConfig, silentLogger } from '@svc/common';
import { RpcVolumePlugin } from '@svc/volumes';
import { startLocalVolumePlugin, useBuiltInVolumePlugin } from './local-volume-plugin.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The built plugin's process (dist/svc-volume-local.mjs, from `npm run build`): killed, it comes back. */
test('svc up\'s local volume plugin answers over its socket, and starts again when its process dies', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-localplugin-'));
  const socketPath = join(dir, 'run', 'local.sock');
  const plugin = await startLocalVolumePlugin({ socketPath, root: join(dir, 'data'), logger: silentLogger() });
  const client = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: socketPath, timeout_ms: 5_000 });
  try {
    const made = await client.create({ volumeId: 'v1', name: 'one' });
    assert.match(made.token, /^svcvol_/);
    assert.ok(existsSync(join(dir, 'data', 'v1')));
    const pids = () => execFileSync('pgrep', ['-f', '--', `--socket ${socketPath}`], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    const [pid] = pids();
    assert.ok(pid, 'a process of its own serves the plugin');
    process.kill(Number(pid), 'SIGKILL');
    const until = Date.now() + 10_000;
    for (;;) {
      const again = await client.create({ volumeId: 'v2', name: 'two' }).then(() => true, () => { /* not up again yet: retry until the deadline */ return false; });
      if (again) break;
      assert.ok(Date.now() < until, 'the plugin came back within 10 s');
      await sleep(200);
    }
    assert.notEqual(pids()[0], pid);
  } finally {
    await client.close();
    await plugin.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the plugin\'s process ends with the process that started it, even one killed without a chance to stop it', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-localplugin-'));
  const socketPath = join(dir, 'run', 'local.sock');
  // A stand-in for svc up: starts the plugin, then is SIGKILLed (no close() runs).
  const parent = spawn(process.execPath, ['--import', 'tsx', '-e', `
    import { startLocalVolumePlugin } from ${JSON.stringify(new URL('./local-volume-plugin.ts', import.meta.url).pathname)};
    import { ConfigError, defaultConfig, silentLogger } from '@svc/common';
    await startLocalVolumePlugin({ socketPath: ${JSON.stringify(socketPath)}, root: ${JSON.stringify(join(dir, 'data'))}, logger: silentLogger() });
    console.log('up');
    setInterval(() => {}, 1000);
  `], { stdio: ['ignore', 'pipe', 'inherit'], cwd: new URL('../../..', import.meta.url).pathname });
  try {
    await new Promise<void>((res, rej) => { parent.stdout!.once('data', () => res()); parent.once('exit', (c) => rej(new Error(`the stand-in exited with ${c}`))); });
    const pids = () => execFileSync('pgrep', ['-f', '--', `--socket ${socketPath}`], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
    assert.equal(pids().length, 1, 'the plugin runs');
    parent.kill('SIGKILL');
    const until = Date.now() + 10_000;
    while ((() => { try { return pids().length; } catch { /* pgrep finds none: exit status 1 */ return 0; } })() > 0) {
      assert.ok(Date.now() < until, 'the plugin ended within 10 s of its parent');
      await sleep(100);
    }
  } finally {
    parent.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

test('a second svc up\'s plugin on the same socket fails and leaves the first one\'s serving', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-localplugin-'));
  const socketPath = join(dir, 'run', 'local.sock');
  // The plugin's source, so that the test checks this checkout's code, not the last build's.
  const program = ['--import', 'tsx', new URL('../../volumes/src/local-plugin/binary-main.ts', import.meta.url).pathname];
  const first = await startLocalVolumePlugin({ socketPath, root: join(dir, 'data'), logger: silentLogger(), program });
  const client = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: socketPath, timeout_ms: 5_000 });
  try {
    const second = await startLocalVolumePlugin({ socketPath, root: join(dir, 'data'), logger: silentLogger(), program }).catch((err: Error) => err);
    if (!(second instanceof Error)) await second.close();
    assert.match(String(second), /is in use: another local volume plugin serves on it/);
    await sleep(1_500); // past the first's restart delay, had its plugin been cut off
    const made = await client.create({ volumeId: 'v1', name: 'one' });
    assert.match(made.token, /^svcvol_/, 'the first plugin still answers on its socket');
  } finally {
    await client.close();
    await first.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a volume data root that is one of the system\'s directories is a configuration error naming SVC_LOCAL_VOLUME_ROOT', () => {
  for (const root of ['/tmp', '/', '/home', '/var/tmp']) {
    const cfg = defaultConfig();
    assert.throws(() => useBuiltInVolumePlugin(cfg, { SVC_LOCAL_VOLUME_ROOT: root }), (err: Error) => err instanceof ConfigError && /SVC_LOCAL_VOLUME_ROOT: must be a directory of its own/.test(err.message), root);
  }
  const cfg = defaultConfig();
  assert.ok(useBuiltInVolumePlugin(cfg, { SVC_LOCAL_VOLUME_ROOT: '/var/lib/svc/volumes' }));
  assert.equal(cfg.master.volume_plugins[0]!.name, 'local');
});
