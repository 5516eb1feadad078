import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { envdHealthy } from './envd-client.ts';
import { run } from './host/exec.ts';
import { startNodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { RecordStore } from './sandboxes/record.ts';
import { createRequest, leftovers, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';

async function until(cond: () => Promise<boolean>, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const readRecords = async (stateDir: string) => (await new RecordStore(join(stateDir, 'instances')).loadAll()).records;

const CHILD = fileURLToPath(new URL('./testing/agent-child.ts', import.meta.url));

/** Starts an agent in a child process; resolves with its URL once it serves. */
async function startChild(env: TestEnv, cfg: unknown) {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, NATEST_CONFIG: JSON.stringify(cfg), NATEST_ENVD: env.envd.path },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  const end = Date.now() + 30_000;
  while (!out.includes('\n')) {
    if (Date.now() > end || child.exitCode !== null) throw new Error('agent child did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, url: (JSON.parse(out.split('\n')[0]) as { url: string }).url };
}

describe('node agent crash reconciliation', () => {
  let env: TestEnv;

  before(async () => { env = await makeTestEnv('crash', '10.201.5.0/24'); });
  after(async () => { await env?.cleanup(); });

  it('after kill -9, adopts live sandboxes and removes everything orphaned', async () => {
    const cfg = env.config({ warm_pool_size: 1 });
    const stateDir = cfg.node_agent.state_dir;
    const names = new ResourceNames(stateDir);
    const { child, url } = await startChild(env, cfg);
    let agent: Awaited<ReturnType<typeof startNodeAgent>> | undefined;
    try {
      const c1 = new NodeAgentClient(url);
      const running = await c1.createSandbox(createRequest(env, { envVars: { KEEP: '1' } }));
      const paused = await c1.createSandbox(createRequest(env));
      await c1.pauseSandbox(paused.sandboxId);
      // Paused without its memory: nothing of it runs, and its files must outlive the agent.
      const filesOnly = await c1.createSandbox(createRequest(env));
      await fetch(`http://${filesOnly.address}:49983/files?path=/root/kept.txt`, { method: 'POST', body: (() => { const f = new FormData(); f.append('file', new Blob(['kept']), 'kept.txt'); return f; })() });
      await c1.pauseSandbox(filesOnly.sandboxId, { memory: false });
      // A create in flight when the agent dies: whatever it made is an orphan.
      const cut = createRequest(env, { memoryMB: 300 });
      const inFlight = c1.createSandbox(cut).catch(() => { /* the agent is killed under it: its failure is the point */ return undefined; });
      await until(async () => (await readRecords(stateDir)).some((r) => r.sandboxId === cut.sandboxId && r.phase === 'creating'));
      child.kill('SIGKILL');
      await once(child, 'exit');
      await inFlight;
      // Debris with the agent's names that no record explains.
      const strayNs = names.netns('zzzzzzz');
      await run('ip', ['netns', 'add', strayNs]);
      await run('ip', ['link', 'add', names.hostVeth('yyyyyyy'), 'type', 'veth', 'peer', 'name', `natpeer${names.tag}`]);

      // Restarted without a pool: a template on the node would otherwise start warm sandboxes
      // at once (warm-pool.test.ts), and this test counts what reconciliation leaves.
      const restarted = { ...cfg, node_agent: { ...cfg.node_agent, warm_pool_size: 0 } };
      agent = await startNodeAgent(restarted, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
      const c2 = new NodeAgentClient(agent.url);
      const list = await c2.listSandboxes();
      assert.deepEqual(list.map((s) => s.sandboxId).sort(), [running.sandboxId, paused.sandboxId, filesOnly.sandboxId].sort());
      assert.equal((await c2.getSandbox(running.sandboxId)).state, 'running');
      assert.equal((await c2.getSandbox(paused.sandboxId)).state, 'paused');
      assert.equal((await c2.getSandbox(filesOnly.sandboxId)).pauseKind, 'filesystem');
      assert.ok(await envdHealthy(running.address), 'adopted sandbox does not answer');
      const envs = await (await fetch(`http://${running.address}:49983/envs`)).json() as Record<string, string>;
      assert.equal(envs.KEEP, '1');
      await assert.rejects(c2.getSandbox(cut.sandboxId), (e: { status: number }) => e.status === 404);

      // Only the adopted sandboxes' resources remain.
      const kept = [agent.inspect(running.sandboxId), agent.inspect(paused.sandboxId), agent.inspect(filesOnly.sandboxId)];
      const left = await leftovers(stateDir, names.tag);
      assert.deepEqual(left.netns.map((l) => l.split(' ')[0]).sort(), kept.map((k) => k.netns).sort());
      assert.deepEqual(left.links.map((l) => l.split('@')[0]).sort(), kept.map((k) => k.hostVeth).sort());
      assert.deepEqual(left.instances.sort(), kept.map((k) => k.instanceId).sort());
      assert.equal(left.runsc.filter((f) => f.endsWith('.state')).length, 2);
      assert.equal(left.mounts.length, 5, 'each adopted sandbox keeps its writable-layer disk, the two that run or are frozen their rootfs overlay too');
      assert.equal(left.loops.length, 3);
      assert.ok(!existsSync(`/var/run/netns/${strayNs}`));
      // Firewall rules exist for the adopted sandboxes only.
      assert.equal(left.nft.filter((l) => l.startsWith('chain sb_')).length, 3);

      // The adopted sandboxes are fully usable.
      assert.equal((await c2.resumeSandbox(paused.sandboxId)).state, 'running');
      assert.ok(await envdHealthy(paused.address));
      assert.equal((await c2.resumeSandbox(filesOnly.sandboxId, { envVars: {} })).state, 'running');
      assert.equal(await (await fetch(`http://${filesOnly.address}:49983/files?path=/root/kept.txt`)).text(), 'kept');
      await c2.deleteSandbox(running.sandboxId);
      await c2.deleteSandbox(paused.sandboxId);
      await c2.deleteSandbox(filesOnly.sandboxId);
    } finally {
      // Whatever happened above, leave nothing running: a fresh agent adopts and destroys.
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      agent ??= await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path });
      await agent.close({ destroySandboxes: true });
    }
    const left = await leftovers(stateDir, names.tag);
    for (const [kind, items] of Object.entries(left)) assert.deepEqual(items, [], `${kind} left behind`);
  });
});
