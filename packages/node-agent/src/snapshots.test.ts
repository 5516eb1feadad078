import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { NodeAgentClient } from '@svc/contracts/node-agent';
import type { NodeAgent } from './index.ts';
import { createRequest, startAgentUnderTest, type AgentUnderTest } from './testing/fixtures.ts';

describe('node agent snapshots: a captured writable layer (real runsc)', () => {
  let t: AgentUnderTest;
  let agent: NodeAgent;
  let client: NodeAgentClient;

  before(async () => {
    t = await startAgentUnderTest('snap', '10.201.32.0/24');
    ({ agent, client } = t);
  });

  after(() => t?.close());

  const sh = async (sandboxId: string, script: string) => {
    const r = await agent.exec(sandboxId, ['sh', '-c', script]);
    assert.equal(r.code, 0, `${script}: ${r.stderr}`);
    return r.stdout;
  };

  it('a create from the layer has the files written before it, deletions and replaced directories included, and none written after', async () => {
    const origin = createRequest(t.env);
    await client.createSandbox(origin);
    // A new file, a template file deleted (a whiteout), a template directory replaced (opaque),
    // and a write the sandbox's kernel may still hold when the snapshot starts.
    await sh(origin.sandboxId, 'echo before > /root/a && rm /etc/group && mkdir -p /srv/d && echo deep > /srv/d/f');
    await sh(origin.sandboxId, 'rm -rf /etc && mkdir /etc && echo "root:x:0:0:root:/root:/bin/sh" > /etc/passwd');
    await sh(origin.sandboxId, 'echo late > /root/late');
    const layer = await client.snapshotSandbox(origin.sandboxId, { layerId: 'snap-layer-1' });
    await sh(origin.sandboxId, 'echo after > /root/after');

    const child = { ...createRequest(t.env), layer: { layerId: layer.layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes } };
    await client.createSandbox(child);
    try {
      assert.equal(await sh(child.sandboxId, 'cat /root/a /root/late /srv/d/f'), 'before\nlate\ndeep\n');
      assert.equal(await sh(child.sandboxId, 'ls /etc | sort | tr "\\n" " "'), 'hostname ld.so.preload passwd resolv.conf ');
      assert.equal(await sh(child.sandboxId, 'test -e /root/after && echo there || echo absent'), 'absent\n');
      // The child's writes are its own.
      await sh(child.sandboxId, 'echo child > /root/child');
      assert.equal(await sh(origin.sandboxId, 'test -e /root/child && echo there || echo absent'), 'absent\n');
      assert.equal(await sh(origin.sandboxId, 'cat /root/after'), 'after\n', 'the origin runs on after its snapshot');
      // The layer can go while a sandbox made from it runs: the sandbox holds its own copy.
      await client.deleteLayer(layer.layerId);
      assert.equal(await sh(child.sandboxId, 'cat /root/a'), 'before\n');
    } finally {
      await client.deleteSandbox(child.sandboxId);
      await client.deleteSandbox(origin.sandboxId);
    }
  });

  it('two creates from one layer do not see each other\'s writes', async () => {
    const origin = createRequest(t.env);
    await client.createSandbox(origin);
    await sh(origin.sandboxId, 'echo shared > /root/s');
    const layer = await client.snapshotSandbox(origin.sandboxId, { layerId: 'snap-layer-2' });
    const [a, b] = [{ ...createRequest(t.env), layer: { layerId: layer.layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes } }, { ...createRequest(t.env), layer: { layerId: layer.layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes } }];
    await Promise.all([client.createSandbox(a), client.createSandbox(b)]);
    try {
      await sh(a.sandboxId, 'echo mine > /root/s');
      assert.equal(await sh(b.sandboxId, 'cat /root/s'), 'shared\n');
      assert.equal(await sh(origin.sandboxId, 'cat /root/s'), 'shared\n');
    } finally {
      for (const s of [a, b, origin]) await client.deleteSandbox(s.sandboxId);
      await client.deleteLayer(layer.layerId);
    }
  });
});
