import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { removeTempDir, tempDir } from '../testing/host.ts';
import { LocalVolumes } from './local-volumes.ts';
import { startLocalRpcServer } from './rpc-server.ts';

describe('the local plugin\'s socket', () => {
  let dir: string;
  before(() => {
    dir = tempDir('rpc-socket');
  });
  after(() => removeTempDir(dir));

  it('a second server never removes the socket a first one still answers on', async () => {
    const socketPath = join(dir, 'live.sock');
    const volumes = new LocalVolumes({ root: join(dir, 'data') });
    const first = await startLocalRpcServer({ socketPath, volumes });
    try {
      const second = await startLocalRpcServer({ socketPath, volumes }).catch((err: Error) => err);
      if (!(second instanceof Error)) await second.close();
      assert.match(String(second), /is in use: another local volume plugin serves on it/);
      assert.ok(existsSync(socketPath), 'the first server\'s socket is still there');
    } finally {
      await first.close();
    }
    assert.equal(existsSync(socketPath), false, 'the first removes its own socket at close');
  });

  it('a socket left by a server that is gone is replaced', async () => {
    const socketPath = join(dir, 'stale.sock');
    // A server killed without a chance to remove its socket.
    const child = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(socketPath)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => child.stdout.once('data', r));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    assert.ok(existsSync(socketPath));
    const server = await startLocalRpcServer({ socketPath, volumes: new LocalVolumes({ root: join(dir, 'data') }) });
    await server.close();
  });
});
