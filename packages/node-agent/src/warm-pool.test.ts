import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { run } from './host/exec.ts';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { createRequest, leftovers, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('node agent warm pool', () => {
  let env: TestEnv;
  let agent: NodeAgent;
  let client: NodeAgentClient;
  let stateDir: string;
  let tag: string;

  before(async () => {
    env = await makeTestEnv('warm', '10.201.4.0/24');
    const cfg = env.config({ warm_pool_size: 2 });
    stateDir = cfg.node_agent.state_dir;
    tag = new ResourceNames(stateDir).tag;
    agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
    client = new NodeAgentClient(agent.url);
  });

  after(async () => {
    await agent?.close({ destroySandboxes: true });
    if (stateDir) {
      const left = await leftovers(stateDir, tag);
      for (const [kind, items] of Object.entries(left)) assert.deepEqual(items, [], `${kind} left behind after close`);
    }
    await env?.cleanup();
  });

  it('fills after ensure, hands out personalised sandboxes, refills, and starts cold for other shapes', async () => {
    const { artifactId, ...rest } = env.artifact;
    await client.ensureArtifact(artifactId, rest);
    await until('the pool to fill', () => agent.warmCount() === 2);
    assert.deepEqual((await client.info()).sandboxes, { running: 0, paused: 0 }, 'warm sandboxes are not user sandboxes');

    // Warm sandboxes reach nothing (WARM_POLICY): no chain ends in accept, none is NAT'd.
    const table = (await run('nft', ['list', 'table', 'ip', `svc_${tag}`])).stdout;
    const warmAddresses = [...table.matchAll(/ip saddr != (\d+\.\d+\.\d+\.\d+) drop/g)].map((m) => m[1]!);
    assert.equal(warmAddresses.length, 2);
    assert.doesNotMatch(table, /\n\s*accept\n/);
    assert.doesNotMatch((await run('nft', ['list', 'set', 'ip', `svc_${tag}`, 'sandbox_nat'])).stdout, /elements/);
    // So no flow of a warm sandbox is ever tracked (a dropped packet's entry is never confirmed),
    // and the hand-out has nothing to forget (create.ts handOutNetwork).
    for (const address of warmAddresses) {
      assert.doesNotMatch((await run('conntrack', ['-L', '-s', address], { allowFail: true })).stdout, /src=/, `no tracked flow from warm ${address}`);
    }

    const started = Date.now();
    const sb = await client.createSandbox(createRequest(env, { envVars: { WARM: 'yes' }, envdAccessToken: 'warm-token', allowInternetAccess: true }));
    const ms = Date.now() - started;
    assert.equal(sb.fromWarmPool, true);
    assert.ok(ms < 500, `warm create took ${ms} ms`);
    // Warm sandboxes wait at a low CPU weight; the one handed out weighs as much as any.
    const names = new ResourceNames(stateDir);
    const shares = (instanceId: string) => readFile(`/sys/fs/cgroup/cpu/${names.cgroupParent}/${names.container(instanceId)}/cpu.shares`, 'utf8').then(Number);
    assert.equal(await shares(agent.inspect(sb.sandboxId).instanceId), 1024);
    // Its envd ran the warm-up command at boot, before anyone asked (packages/envd/src/warm-up.ts).
    const consoleLog = () => readFile(`${agent.inspect(sb.sandboxId).dir}/console.log`, 'utf8');
    await until('the warm-up command', async () => /warm-up command done in \d+ ms \(HTTP 200\)/.test(await consoleLog()), 10_000);
    // Personalised through envd's /init: env vars and access token.
    assert.equal((await fetch(`http://${sb.address}:49983/envs`)).status, 401);
    const envs = await (await fetch(`http://${sb.address}:49983/envs`, { headers: { 'x-access-token': 'warm-token' } })).json() as Record<string, string>;
    assert.equal(envs.WARM, 'yes');
    assert.equal(envs.E2B_SANDBOX_ID, sb.sandboxId);
    // Its egress policy is the request's now, not the warm deny-all.
    const chain = (await run('nft', ['list', 'chain', 'ip', `svc_${tag}`, `sb_${agent.inspect(sb.sandboxId).instanceId}`])).stdout;
    assert.match(chain, /\n\s*accept\n/);
    assert.match((await run('nft', ['list', 'set', 'ip', `svc_${tag}`, 'sandbox_nat'])).stdout, new RegExp(sb.address.replace(/\./g, '\\.')));

    await until('the pool to refill', () => agent.warmCount() === 2);
    const cold = await client.createSandbox(createRequest(env, { memoryMB: 300 }));
    assert.equal(cold.fromWarmPool, undefined);
    assert.equal(agent.warmCount(), 2);

    await client.deleteSandbox(sb.sandboxId);
    await client.deleteSandbox(cold.sandboxId);
    // Deleting the artifact empties its pool.
    await client.deleteArtifact(artifactId);
    assert.equal(agent.warmCount(), 0);
    await agent.settled();
    const left = await leftovers(stateDir, tag);
    for (const [kind, items] of Object.entries(left)) assert.deepEqual(items, [], `${kind} left behind`);
  });

  it('fills after first use, and close destroys warm sandboxes', async () => {
    const sb = await client.createSandbox(createRequest(env));
    assert.equal(sb.fromWarmPool, undefined);
    await until('the pool to fill', () => agent.warmCount() === 2);
    await client.deleteSandbox(sb.sandboxId);
  });

  it('a restarted agent starts the pools of the templates it holds', async () => {
    await agent.close({ destroySandboxes: true });
    assert.equal(agent.warmCount(), 0);
    agent = await startNodeAgent(env.config({ warm_pool_size: 2 }), { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
    client = new NodeAgentClient(agent.url);
    await until('the pool to fill after the restart', () => agent.warmCount() === 2);
    // The after hook closes the agent and checks that nothing is left.
  });
});
