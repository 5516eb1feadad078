/**
 * A node agent offering both runtimes (node_agent.runtime gvisor,microvm): each create runs on the
 * runtime it names and pauses its own way, and a sandbox of a runtime the node stops offering is
 * kept until it offers it again. Skipped without QEMU or a guest kernel.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { assertNothingLeft, createRequest, leftovers, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';
import { microvmMissing, qemuProcesses } from './testing/microvm-host.ts';

describe('a node offering both runtimes (node_agent.runtime gvisor,microvm)', { skip: microvmMissing ?? false }, () => {
  let env: TestEnv;
  let agent: NodeAgent | undefined;
  let cfg: ReturnType<TestEnv['config']>;
  const start = (runtime: string) => startNodeAgent({ ...cfg, node_agent: { ...cfg.node_agent, runtime } }, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });

  before(async () => {
    env = await makeTestEnv('both', '10.201.10.0/24');
    cfg = env.config({ runtime: 'gvisor,microvm' });
    agent = await start('gvisor,microvm');
  });

  after(async () => {
    await agent?.close({ destroySandboxes: true });
    await env?.cleanup();
  });

  it('runs each create on the runtime it names, pauses each its own way, and keeps a sandbox of a runtime it stops offering until it offers it again', async () => {
    let client = new NodeAgentClient(agent!.url);
    const info = await client.info();
    assert.equal(info.runtime, 'gvisor');
    assert.deepEqual(info.runtimes, ['gvisor', 'microvm']);
    await assert.rejects(client.createSandbox({ ...createRequest(env), runtime: 'docker' as never }),
      (e: Error & { status?: number }) => e.status === 400 && /runtime must be one of gvisor, microvm/.test(e.message));

    const plain = await client.createSandbox(createRequest(env, { timeoutMs: 120_000 }));
    const vm = await client.createSandbox(createRequest(env, { timeoutMs: 120_000, runtime: 'microvm' }));
    assert.equal(plain.runtime, 'gvisor', 'no runtime named: the default');
    assert.equal(vm.runtime, 'microvm');
    const kernel = async (id: string) => (await agent!.exec(id, ['busybox', 'uname', '-r'])).stdout.trim();
    assert.notEqual(await kernel(plain.sandboxId), await kernel(vm.sandboxId), "gVisor's kernel and the guest's");
    for (const sb of [plain, vm]) assert.equal((await agent!.exec(sb.sandboxId, ['sh', '-c', 'echo kept > /root/file'])).code, 0);

    assert.equal((await client.pauseSandbox(plain.sandboxId)).pauseKind, 'freeze');
    assert.equal((await client.pauseSandbox(vm.sandboxId)).pauseKind, 'snapshot');
    const stateDir = cfg.node_agent.state_dir;
    // The microvm create had the template's guest saved in the background: a QEMU of its own until then.
    await agent!.settled();
    assert.deepEqual(await qemuProcesses(stateDir), []);

    // The operator drops microvm: the paused guest is left as it is (nothing of it runs), the gvisor sandbox is adopted.
    await agent!.close();
    agent = await start('gvisor');
    client = new NodeAgentClient(agent.url);
    assert.equal((await client.getSandbox(plain.sandboxId)).state, 'paused');
    await assert.rejects(client.getSandbox(vm.sandboxId), (e: Error & { status?: number }) => e.status === 404);
    await assert.rejects(client.createSandbox(createRequest(env, { runtime: 'microvm' })),
      (e: Error & { status?: number }) => e.status === 400 && /this node offers gvisor/.test(e.message));

    // Offered again: adopted, and both resume with their files.
    await agent.close();
    agent = await start('gvisor,microvm');
    client = new NodeAgentClient(agent.url);
    for (const sb of [plain, vm]) {
      assert.equal((await client.getSandbox(sb.sandboxId)).state, 'paused');
      assert.equal((await client.resumeSandbox(sb.sandboxId)).state, 'running');
      assert.equal((await agent.exec(sb.sandboxId, ['cat', '/root/file'])).stdout.trim(), 'kept');
    }
    await client.deleteSandbox(plain.sandboxId);
    await client.deleteSandbox(vm.sandboxId);
    assert.deepEqual(await qemuProcesses(stateDir), []);
    assertNothingLeft(await agent.settled().then(() => leftovers(stateDir, new ResourceNames(stateDir).tag)));
  });
});
