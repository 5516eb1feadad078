import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { silentLogger } from '@svc/common';
import { RpcVolumePlugin } from '@svc/volumes';
import { startLocalVolumePlugin } from './local-volume-plugin.ts';

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
