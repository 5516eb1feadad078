import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SvcError } from '@svc/common';
import type { NodeAgentClient } from '@svc/contracts/node-agent';
import type { NodeAgent } from './index.ts';
import { createRequest, startAgentUnderTest, type AgentUnderTest } from './testing/fixtures.ts';

const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: SvcError) => e.status);

describe('node agent filesystem pause: memory freed, files kept, booted again (real runsc)', () => {
  let t: AgentUnderTest;
  let agent: NodeAgent;
  let client: NodeAgentClient;

  before(async () => {
    t = await startAgentUnderTest('fspause', '10.201.33.0/24');
    ({ agent, client } = t);
  });

  after(() => t?.close());

  const sh = async (sandboxId: string, script: string) => (await agent.exec(sandboxId, ['sh', '-c', script])).stdout;

  it('ends the processes and frees their memory, keeps the files, and boots with the identity given again', async () => {
    const req = createRequest(t.env, { envVars: { FIRST: '1' } });
    await client.createSandbox(req);
    try {
      await sh(req.sandboxId, 'echo kept > /root/file; sleep 1000 >/dev/null 2>&1 &');
      const paused = await client.pauseSandbox(req.sandboxId, { memory: false });
      assert.equal(paused.state, 'paused');
      assert.equal(paused.pauseKind, 'filesystem');
      const instance = agent.inspect(req.sandboxId);
      const cg = `/sys/fs/cgroup/memory/svc-${t.tag}/svc-${t.tag}-${instance.instanceId}`;
      assert.equal(await import('node:fs').then((fs) => fs.existsSync(cg)), false, 'no cgroup, so no memory, is left');
      assert.equal((await client.info()).sandboxes.paused, 1);

      assert.equal(await statusOf(client.resumeSandbox(req.sandboxId)), 400, 'a boot needs its environment');
      const resumed = await client.resumeSandbox(req.sandboxId, { envVars: { SECOND: '2' } });
      assert.equal(resumed.state, 'running');
      assert.equal(resumed.pauseKind, undefined);
      assert.equal(await sh(req.sandboxId, 'cat /root/file'), 'kept\n');
      assert.equal(await sh(req.sandboxId, 'pgrep -f "sleep 1000" || echo none'), 'none\n', 'processes did not survive');
    } finally {
      await client.deleteSandbox(req.sandboxId);
    }
  });

  it('a frozen sandbox resumed with memory false boots from its files; a filesystem-paused one is deleted cleanly', async () => {
    const req = createRequest(t.env);
    await client.createSandbox(req);
    await sh(req.sandboxId, 'echo frozen > /root/f');
    await client.pauseSandbox(req.sandboxId);
    const rebooted = await client.resumeSandbox(req.sandboxId, { memory: false, envVars: {} });
    assert.equal(rebooted.state, 'running');
    assert.equal(await sh(req.sandboxId, 'cat /root/f'), 'frozen\n');
    await client.pauseSandbox(req.sandboxId, { memory: false });
    assert.equal(await statusOf(client.pauseSandbox(req.sandboxId, { memory: false })), 409);
    await client.deleteSandbox(req.sandboxId);
    assert.equal(await statusOf(client.getSandbox(req.sandboxId)), 404);
  });
});
