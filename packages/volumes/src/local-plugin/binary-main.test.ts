import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { VOLUME_NAMESPACE } from '@svc/contracts/volumes';
import { BinaryVolumePlugin } from '../plugins/binary-plugin.ts';
import { RpcVolumePlugin } from '../plugins/rpc-plugin.ts';
import { removeTempDir, tempDir } from '../testing/host.ts';
import { mountCount } from './mounts.ts';

const MAIN = fileURLToPath(new URL('./binary-main.ts', import.meta.url));

describe('the local plugin program (binary-main.ts, run with tsx)', () => {
  let dir: string;
  let root: string;
  let base: string;
  let env: NodeJS.ProcessEnv;

  /** Runs one hook: exit code and the JSON it printed. */
  const run = (args: string[]) =>
    new Promise<{ code: number; answer: Record<string, unknown> }>((resolve, reject) => {
      execFile(process.execPath, ['--import', 'tsx', MAIN, ...args], { env, timeout: 20_000 }, (err, stdout) => {
        if (err && typeof err.code !== 'number') return reject(err);
        try {
          resolve({ code: typeof err?.code === 'number' ? err.code : 0, answer: JSON.parse(stdout) as Record<string, unknown> });
        } catch {
          reject(new Error(`not one JSON line: ${JSON.stringify(stdout)}`));
        }
      });
    });

  before(() => {
    dir = tempDir('main');
    root = join(dir, 'data');
    base = join(dir, 'volume');
    env = { ...process.env, SVC_LOCAL_VOLUME_ROOT: root };
  });
  after(() => removeTempDir(dir));

  it('runs each hook from the protocol flags and prints one JSON answer', async () => {
    const created = await run(['--op', 'create', '--volume-id', 'vol-m', '--name', 'main']);
    assert.equal(created.code, 0);
    assert.match(created.answer.token as string, /^svcvol_/);
    assert.equal(created.answer.private_data, '');
    assert.ok(statSync(join(root, 'vol-m')).isDirectory(), 'the data lives under SVC_LOCAL_VOLUME_ROOT');

    const attachArgs = ['--op', 'attach', '--volume-id', 'vol-m', '--sandbox-id', 'sb', '--namespace', 'svc', '--volume-base-dir', base];
    const attached = await run([...attachArgs, '--ref-count', '0']);
    assert.equal(attached.code, 0);
    const hostPath = join(base, 'local-vol-m');
    assert.deepEqual(attached.answer, { host_path: hostPath, metadata: { data_dir: join(root, 'vol-m'), host_path: hostPath } });
    assert.equal(await mountCount(hostPath), 1);

    const metadata = JSON.stringify(attached.answer.metadata);
    const detachArgs = ['--op', 'detach', '--volume-id', 'vol-m', '--sandbox-id', 'sb', '--namespace', 'svc', '--metadata', metadata];
    assert.deepEqual(await run([...detachArgs, '--ref-count', '0']), { code: 0, answer: {} });
    assert.equal(await mountCount(hostPath), 0);
    assert.deepEqual(await run(['--op', 'destroy', '--volume-id', 'vol-m']), { code: 0, answer: {} });
    assert.equal(existsSync(join(root, 'vol-m')), false);
  });

  it('prints {"error"} and exits 1 on a failure or a bad command line', async () => {
    assert.deepEqual(await run(['--op', 'destroy', '--volume-id', '../../etc']), {
      code: 1,
      answer: { error: 'volume id "../../etc" must match ^[a-zA-Z0-9_-]{1,128}$' },
    });
    assert.deepEqual(await run(['--op', 'mount', '--volume-id', 'v']), { code: 1, answer: { error: '--op must be one of create, destroy, attach, detach' } });
    assert.deepEqual(await run(['--op', 'attach', '--volume-id', 'v', '--volume-base-dir', base]), {
      code: 1,
      answer: { error: '--ref-count is required for --op attach' },
    });
    const noData = await run(['--op', 'attach', '--volume-id', 'v', '--ref-count', '0', '--volume-base-dir', base]);
    assert.equal(noData.code, 1);
    assert.match(noData.answer.error as string, /^volume v has no data on this host/);
  });

  it('serves as a binary_path to BinaryVolumePlugin (through a wrapper that runs it with tsx)', async () => {
    const wrapper = join(dir, 'svc-volume-local');
    writeFileSync(wrapper, `#!/bin/sh\nSVC_LOCAL_VOLUME_ROOT="${root}" exec "${process.execPath}" --import tsx "${MAIN}" "$@"\n`);
    chmodSync(wrapper, 0o755);
    const plugin = new BinaryVolumePlugin({ name: 'local', type: 'binary', binary_path: wrapper, timeout_ms: 20_000 });
    const { token } = await plugin.create({ volumeId: 'vol-w', name: 'w' });
    assert.match(token, /^svcvol_/);
    const attached = await plugin.attach({ sandboxId: 'sb', namespace: VOLUME_NAMESPACE, volumeId: 'vol-w', refCount: 0, volumeBaseDir: base, privateData: '' });
    assert.equal(await mountCount(attached.hostPath), 1);
    await plugin.detach({ sandboxId: 'sb', namespace: VOLUME_NAMESPACE, volumeId: 'vol-w', refCount: 0, metadata: attached.metadata });
    assert.equal(await mountCount(attached.hostPath), 0);
    await plugin.destroy({ volumeId: 'vol-w' });
    await assert.rejects(
      plugin.attach({ sandboxId: 'sb', namespace: VOLUME_NAMESPACE, volumeId: 'vol-w', refCount: 0, volumeBaseDir: base, privateData: '' }),
      /^VolumePluginError: volume plugin local: attach failed: exit code 1: volume vol-w has no data on this host/,
    );
  });

  it('--serve-rpc --socket serves the gRPC plugin until SIGTERM, then removes the socket', async () => {
    const socket = join(dir, 'local.sock');
    const server = spawn(process.execPath, ['--import', 'tsx', MAIN, '--serve-rpc', '--socket', socket], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    server.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
    try {
      for (let i = 0; i < 200 && !stderr.includes('serving on'); i++) await new Promise((r) => setTimeout(r, 50));
      assert.match(stderr, new RegExp(`serving on unix:${socket}, data under ${root}`));
      const plugin = new RpcVolumePlugin({ name: 'local', type: 'rpc', socket_path: socket });
      try {
        await plugin.create({ volumeId: 'vol-r', name: 'r' });
        assert.ok(statSync(join(root, 'vol-r')).isDirectory());
        assert.equal(readFileSync(join(root, 'vol-r.token'), 'utf8').startsWith('svcvol_'), true);
        await plugin.destroy({ volumeId: 'vol-r' });
      } finally {
        await plugin.close();
      }
      server.kill('SIGTERM');
      assert.equal(await exited, 0);
      assert.equal(existsSync(socket), false);
    } finally {
      server.kill('SIGKILL');
    }
  });
});
