import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MasterClient } from '@svc/contracts/master';
import { startMasterOverFakeNode } from '../testing/master-over-fake-node.ts';

const LOCAL_PLUGIN = fileURLToPath(new URL('../../../volumes/src/local-plugin/binary-main.ts', import.meta.url));

/**
 * docs/cluster.md "Upgrade order", a new master over an old node agent: volume create and delete work, and
 * a sandbox that mounts a volume starts without the mount instead of failing. The fake node
 * agent registers without `features`, as agents older than volumes do.
 */
test('a node agent without volume support makes mounts a no-op, and the create goes on', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-upgrade-'));
  const plugin = join(dir, 'local');
  await writeFile(plugin, `#!/bin/sh\nSVC_LOCAL_VOLUME_ROOT='${join(dir, 'data')}' exec '${process.execPath}' --import tsx '${LOCAL_PLUGIN}' "$@"\n`);
  await chmod(plugin, 0o755);
  const m = await startMasterOverFakeNode((cfg) => { cfg.master.volume_plugins = [{ name: 'local', type: 'binary', binary_path: plugin }]; });
  try {
    const master = new MasterClient(m.master.url);
    const created = await master.http.post<{ volumeID: string; name: string; token: string }>('/svc/volume', { name: 'data' });
    assert.equal(created.name, 'data');
    const sandbox = await master.createSandbox({
      template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
      network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [{ name: 'data', path: '/mnt/data', readOnly: false }],
    });
    assert.equal(sandbox.state, 'running');
    assert.deepEqual(sandbox.volumeMounts, [{ name: 'data', path: '/mnt/data', readOnly: false }], 'the record keeps what was asked');
    assert.equal(m.node.createBodies.get(sandbox.sandboxId)?.volumes, undefined, 'the old agent is sent no volumes');
    await assert.rejects(master.createSandbox({
      template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
      network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [{ name: 'missing', path: '/mnt/x', readOnly: false }],
    }), { status: 404 }, 'a volume that does not exist still fails the create');
    await master.killSandbox(sandbox.sandboxId);
    await master.http.delete(`/svc/volume/${created.volumeID}`);
    await assert.rejects(master.http.get(`/svc/volume/${created.volumeID}`), { status: 404 });
  } finally {
    await m.close();
    await rm(dir, { recursive: true, force: true });
  }
});
