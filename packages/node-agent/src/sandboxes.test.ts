import assert from 'node:assert/strict';
import { readFile, writeFile, chmod } from 'node:fs/promises';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { SvcError } from '@svc/common';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { envdHealthy } from './envd-client.ts';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { sandboxLimits } from './runtime/sandbox-limits.ts';
import { assertNothingLeft, createRequest, leftovers, makeTestEnv, startAgentUnderTest, testLogger, type AgentUnderTest, type TestEnv } from './testing/fixtures.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rejects(p: Promise<unknown>, status: number, message?: RegExp): Promise<SvcError> {
  try {
    await p;
  } catch (err) {
    const e = err as SvcError;
    assert.equal(e.status, status, `expected ${status}, got ${e.status}: ${e.message}`);
    if (message) assert.match(e.message, message);
    return e;
  }
  assert.fail(`expected a ${status} error`);
}


describe('node agent sandboxes (real runsc)', () => {
  let t: AgentUnderTest;
  let env: TestEnv;
  let agent: NodeAgent;
  let client: NodeAgentClient;
  let stateDir: string;
  let tag: string;

  before(async () => {
    t = await startAgentUnderTest('sbx', '10.201.1.0/24');
    ({ env, agent, client, stateDir, tag } = t);
  });

  after(() => t?.close());

  it('creates a sandbox whose envd answers at its address, with the env vars given, and destroys it leaving nothing', async () => {
    const req = createRequest(env, { envVars: { GREETING: 'hello' }, metadata: { k: 'v' } });
    const sb = await client.createSandbox(req);
    assert.equal(sb.sandboxId, req.sandboxId);
    assert.equal(sb.state, 'running');
    assert.equal(sb.runtime, 'gvisor');
    assert.equal(sb.envdPort, 49983);
    assert.match(sb.envdVersion, /^\d+\.\d+\.\d+/);
    assert.match(sb.address, /^10\.201\.1\.\d+$/);
    assert.ok(await envdHealthy(sb.address));
    const envs = await (await fetch(`http://${sb.address}:49983/envs`)).json() as Record<string, string>;
    assert.equal(envs.GREETING, 'hello');
    assert.equal(envs.E2B_SANDBOX_ID, sb.sandboxId);
    assert.deepEqual((await client.getSandbox(sb.sandboxId)).sandboxId, sb.sandboxId);
    assert.ok((await client.listSandboxes()).some((s) => s.sandboxId === sb.sandboxId));

    // CPU and memory limits reach the sandbox: gVisor sizes its memory and CPUs from them.
    const meminfo = await agent.exec(sb.sandboxId, ['cat', '/proc/meminfo']);
    assert.match(meminfo.stdout, /MemTotal:\s+262144 kB/);
    const cg = `/sys/fs/cgroup/memory/svc-${tag}/svc-${tag}-${agent.inspect(sb.sandboxId).instanceId}/memory.limit_in_bytes`;
    // The host cgroup holds headroom for gVisor itself above the sandbox's own size (runtime/sandbox-limits.ts).
    assert.equal((await readFile(cg, 'utf8')).trim(), String(sandboxLimits({ cpuCount: 1, memoryMB: 256, diskSizeMB: 512 }).hostMemoryBytes));

    const m = await client.metrics(sb.sandboxId);
    assert.equal(m.cpuCount, 1);
    assert.equal(m.memTotal, 256 * 1024 * 1024);
    assert.equal(m.diskTotal, 512 * 1024 * 1024);
    assert.ok(m.memUsed > 0 && m.cpuUsedPct >= 0 && m.diskUsed >= 0 && m.timestampUnix > 0);

    await client.deleteSandbox(sb.sandboxId);
    await rejects(client.getSandbox(sb.sandboxId), 404);
    assert.equal(await envdHealthy(sb.address, 300), false);
    await t.assertClean();
  });

  it('a command\'s environment, text and user reach the sandbox in a file, never on a host command line (/proc/*/cmdline)', async () => {
    const sb = await client.createSandbox(createRequest(env));
    try {
      const secret = `sekrit-${Date.now()}`;
      const running = (agent.exec as (id: string, argv: string[], o: object) => ReturnType<NodeAgent['exec']>)(sb.sandboxId, ['sh', '-c', `sleep 2; echo "$TOKEN" ${'word-of-the-step'}; id -u; pwd`], { env: { TOKEN: secret }, user: { name: 'user', uid: '1000', gid: '1000' }, cwd: '/tmp' });
      const seen: string[] = [];
      for (const until = Date.now() + 1_500; Date.now() < until;) {
        for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
          let cmdline = '';
          try { cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8'); } catch { continue; /* it ended meanwhile */ }
          if (cmdline.includes(secret) || cmdline.includes('word-of-the-step')) seen.push(cmdline.replaceAll('\0', ' '));
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(seen, [], 'no host process showed the command\'s secret or text');
      const r = await running;
      assert.equal(r.stdout.trim(), `${secret} word-of-the-step\n1000\n/tmp`);
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });

  it('holds a sandbox to its CPU quota', async () => {
    const sb = await client.createSandbox(createRequest(env, { cpuCount: 1 }));
    for (let i = 0; i < 3; i++) await agent.exec(sb.sandboxId, ['sh', '-c', 'while :; do :; done'], { detach: true });
    await sleep(500);
    const usage = () => readFile(`/sys/fs/cgroup/cpuacct/svc-${tag}/svc-${tag}-${agent.inspect(sb.sandboxId).instanceId}/cpuacct.usage`, 'utf8').then(Number);
    const [u0, t0] = [await usage(), performance.now()];
    await sleep(1000);
    const cpus = (await usage() - u0) / 1e6 / (performance.now() - t0);
    assert.ok(cpus < 1.2, `three busy loops used ${cpus.toFixed(2)} CPUs with cpuCount 1`);
    assert.ok(cpus > 0.3, `busy loops used only ${cpus.toFixed(2)} CPUs`);
    const m = await client.metrics(sb.sandboxId);
    assert.ok(m.cpuUsedPct > 30, `metrics say ${m.cpuUsedPct}% CPU`);
    await client.deleteSandbox(sb.sandboxId);
  });

  it('a secure sandbox gets its envd access token', async () => {
    const sb = await client.createSandbox(createRequest(env, { envdAccessToken: 'tok-123' }));
    assert.equal((await fetch(`http://${sb.address}:49983/envs`)).status, 401);
    const envs = await (await fetch(`http://${sb.address}:49983/envs`, { headers: { 'x-access-token': 'tok-123' } })).json() as Record<string, string>;
    assert.equal(envs.SVC_ENVD_ACCESS_TOKEN, undefined, 'the token is not handed to processes');
    await client.deleteSandbox(sb.sandboxId);
  });

  it('pause freezes processes and envd; resume continues them with files intact; pause twice is 409', async () => {
    const sb = await client.createSandbox(createRequest(env));
    try {
      const upper = join(agent.inspect(sb.sandboxId).dir, 'disk', 'upper');
      await agent.exec(sb.sandboxId, ['sh', '-c', 'echo kept > /root/file']);
      await agent.exec(sb.sandboxId, ['sh', '-c', 'i=0; while :; do i=$((i+1)); echo $i > /root/counter; sleep 0.05; done'], { detach: true });
      const counter = async () => Number((await readFile(join(upper, 'root/counter'), 'utf8').catch(() => { /* not written yet: counts as 0 */ return ''; })).trim()) || 0;
      /** Waits (up to 5 s: ptrace sandboxes are slow on a busy machine) for the counter to pass `n`. */
      const counterPasses = async (n: number) => {
        for (let i = 0; i < 100; i++) {
          if ((await counter()) > n) return true;
          await sleep(50);
        }
        return false;
      };
      assert.ok(await counterPasses(0), 'the counter loop did not start');

      const paused = await client.pauseSandbox(sb.sandboxId);
      assert.equal(paused.state, 'paused');
      assert.equal(paused.pauseKind, 'freeze');
      const frozenAt = await counter();
      await sleep(500);
      assert.equal(await counter(), frozenAt, 'counter advanced while paused');
      assert.equal(await envdHealthy(sb.address, 300), false, 'envd answered while paused');
      assert.equal((await client.getSandbox(sb.sandboxId)).state, 'paused');
      const e = await rejects(client.pauseSandbox(sb.sandboxId), 409, /already paused/);
      assert.equal(e.code, 409);
      assert.deepEqual((await client.info()).sandboxes, { running: 0, paused: 1 });

      const resumed = await client.resumeSandbox(sb.sandboxId);
      assert.equal(resumed.state, 'running');
      assert.equal(resumed.pauseKind, undefined);
      assert.ok(await counterPasses(frozenAt), 'counter did not continue after resume');
      assert.ok(await envdHealthy(sb.address));
      assert.equal((await agent.exec(sb.sandboxId, ['cat', '/root/file'])).stdout.trim(), 'kept');
      // Resume of a running sandbox is a no-op.
      assert.equal((await client.resumeSandbox(sb.sandboxId)).state, 'running');
    } finally {
      // A failure here must not leave its sandbox to fail every later test's leftover check.
      await client.deleteSandbox(sb.sandboxId).catch(() => { /* the test deleted it already */ });
    }
  });

  it('deletes a paused sandbox without resuming it', async () => {
    const sb = await client.createSandbox(createRequest(env));
    await client.pauseSandbox(sb.sandboxId);
    await client.deleteSandbox(sb.sandboxId);
    await rejects(client.getSandbox(sb.sandboxId), 404);
    await t.assertClean();
  });

  it('reports the node', async () => {
    const info = await client.info();
    assert.equal(info.nodeId, agent.nodeId);
    assert.equal(info.runtime, 'gvisor');
    assert.deepEqual(info.pauseKinds, ['freeze', 'filesystem']);
    assert.ok(info.capacity.cpuCount > 0 && info.capacity.memoryMB > 0);
    assert.equal(info.pausedResourceReleaseRatio, 0);
    assert.equal(info.address, agent.url);
    const health = await (await fetch(`${agent.url}/health`)).json() as { ok: boolean; nodeId: string; tasks: Record<string, { runs: number; failures: number }> };
    assert.deepEqual({ ok: health.ok, nodeId: health.nodeId }, { ok: true, nodeId: agent.nodeId });
    assert.deepEqual(Object.keys(health.tasks).sort(), ['allowOut host names learned again', 'console log cap', 'liveness sweep', 'memory measure']);
    assert.equal(health.tasks['memory measure']!.failures, 0);
  });

  it('answers bad input with clear errors', async () => {
    await rejects(client.getSandbox('nope'), 404, /not found/);
    await rejects(client.deleteSandbox('nope'), 404);
    await rejects(client.pauseSandbox('nope'), 404);
    await rejects(client.resumeSandbox('nope'), 404);
    await rejects(client.metrics('nope'), 404);
    await rejects(client.getSandbox('bad id!'), 400);
    const post = (body: unknown) => fetch(`${agent.url}/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    for (const [body, msg] of [
      [{}, /sandboxId/],
      [{ ...createRequest(env), cpuCount: 0 }, /cpuCount/],
      [{ ...createRequest(env), memoryMB: 'x' }, /memoryMB/],
      [{ ...createRequest(env), envVars: { 'BAD NAME': 'x' } }, /envVars/],
      [{ ...createRequest(env), artifact: { ...env.artifact, sha256: 'abc' } }, /sha256/],
      [{ ...createRequest(env), network: { allowOut: [], denyOut: ['example.com'] } }, /denyOut/],
      [{ ...createRequest(env), network: { allowOut: ['300.1.1.1'], denyOut: [] } }, /allowOut/],
    ] as const) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      const b = await res.json() as { code: number; message: string };
      assert.match(b.message, msg);
    }
    const bad = await fetch(`${agent.url}/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{nope' });
    assert.equal(bad.status, 400);

    const wrongSha = createRequest(env, { artifact: { ...env.artifact, artifactId: 'art-wrong', sha256: 'a'.repeat(64) } });
    await rejects(client.createSandbox(wrongSha), 502, /sha256 mismatch/);
    assert.ok(!(await client.listArtifacts()).some((a) => a.artifactId === 'art-wrong'));
    const missing = createRequest(env, { artifact: { ...env.artifact, artifactId: 'art-missing', downloadUrl: `${env.server.url}/nothing` } });
    await rejects(client.createSandbox(missing), 502, /answered 404/);
    await t.assertClean();
  });

  it('ensures, lists and deletes artifacts; refuses to delete one in use', async () => {
    const { artifactId, ...rest } = env.artifact;
    const a = await client.ensureArtifact(artifactId, rest);
    assert.equal(a.sha256, env.artifact.sha256);
    assert.ok((await client.listArtifacts()).some((x) => x.artifactId === artifactId));
    const hits = env.server.hits();
    await client.ensureArtifact(artifactId, rest);
    assert.equal(env.server.hits(), hits, 'downloaded twice');
    await rejects(client.ensureArtifact(artifactId, { ...rest, sha256: 'b'.repeat(64) }), 409);

    const sb = await client.createSandbox(createRequest(env));
    await rejects(client.deleteArtifact(artifactId), 409, /used by/);
    await client.deleteSandbox(sb.sandboxId);
    await client.deleteArtifact(artifactId);
    await client.deleteArtifact(artifactId);
    assert.ok(!(await client.listArtifacts()).some((x) => x.artifactId === artifactId));
  });

  it('links the template center\'s own file when it is on this filesystem, verified; a wrong one is downloaded instead', async () => {
    const { artifactId, ...rest } = env.artifact;
    const hits = env.server.hits();
    const a = await client.ensureArtifact(artifactId, { ...rest, localPath: env.image });
    assert.equal(env.server.hits(), hits, 'linked, not downloaded');
    assert.equal(statSync(a.path).ino, statSync(env.image).ino, 'the same file, hard-linked');
    await client.deleteArtifact(artifactId);
    assert.ok(existsSync(env.image), 'removing the node\'s copy leaves the template center\'s');

    const impostor = join(env.dir, 'impostor.ext4');
    writeFileSync(impostor, Buffer.alloc(statSync(env.image).size, 1));
    const b = await client.ensureArtifact(artifactId, { ...rest, localPath: impostor });
    assert.equal(env.server.hits(), hits + 1, 'a file with another sha256 is not taken: downloaded');
    assert.notEqual(statSync(b.path).ino, statSync(impostor).ino);
    await client.deleteArtifact(artifactId);
    await client.ensureArtifact(artifactId, { ...rest, localPath: join(env.dir, 'no-such.ext4') });
    assert.equal(env.server.hits(), hits + 2, 'a path that is not there: downloaded');
    await client.deleteArtifact(artifactId);
    await rejects(client.ensureArtifact(artifactId, { ...rest, localPath: 'relative.ext4' }), 400, /localPath must match pattern "\^\/"/);
  });

  it('rolls back a create that misses its deadline', async () => {
    const req = createRequest(env, { timeoutMs: 150 });
    await rejects(client.createSandbox(req), 504, /did not finish within 150 ms/);
    await rejects(client.getSandbox(req.sandboxId), 404);
    await t.assertClean();
  });

  it('says why a create timed out when envd never answers: the last attempt and the sandbox console', async () => {
    const broken = join(env.dir, 'broken-envd.mjs');
    await writeFile(broken, "console.error('envd broken on purpose'); process.exit(3);\n");
    const cfg = env.config({ state_dir: join(env.dir, 'state-broken'), address_pool: '10.201.9.0/29' });
    const other = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: broken, livenessIntervalMs: 60_000 });
    try {
      const req = createRequest(env, { timeoutMs: 4_000 });
      await rejects(new NodeAgentClient(other.url).createSandbox(req), 504,
        /did not finish within 4000 ms: envd at 10\.201\.9\.2:49983 did not answer in time \(last attempt: ECONNREFUSED\); sandbox console: .*envd broken on purpose/);
    } finally {
      await other.close({ destroySandboxes: true });
    }
    assertNothingLeft(await other.settled().then(() => leftovers(cfg.node_agent.state_dir, new ResourceNames(cfg.node_agent.state_dir).tag)));
  });

  it('releases a sandbox whose processes died', async () => {
    const sb = await client.createSandbox(createRequest(env));
    await agent.exec(sb.sandboxId, ['kill', '-9', '1']);
    // The sweep reads the sandbox's processes from the host; they take a moment to exit.
    for (let i = 0; i < 100 && (await client.getSandbox(sb.sandboxId).then(() => true, () => { /* 404: the sweep released it */ return false; })); i++) {
      await agent.sweepDead();
      await sleep(50);
    }
    await rejects(client.getSandbox(sb.sandboxId), 404, /processes exited/);
    await t.assertClean();
    // The agent keeps serving others.
    const other = await client.createSandbox(createRequest(env));
    await client.deleteSandbox(other.sandboxId);
  });

  it('handles concurrent creates and deletes, and a duplicate id', async () => {
    const reqs = [0, 1, 2].map(() => createRequest(env));
    const creating = reqs.map((r) => client.createSandbox(r));
    // A delete that arrives while its create runs waits for it, then removes the sandbox.
    const early = client.deleteSandbox(reqs[0].sandboxId);
    const dup = client.createSandbox(reqs[1]);
    const results = await Promise.allSettled([...creating, early, dup]);
    assert.equal(results[0].status, 'fulfilled');
    assert.equal(results[1].status, 'fulfilled');
    assert.equal(results[2].status, 'fulfilled');
    assert.equal(results[3].status, 'fulfilled', 'delete during create');
    assert.equal(results[4].status, 'rejected');
    assert.equal(((results[4] as PromiseRejectedResult).reason as SvcError).status, 409);
    await rejects(client.getSandbox(reqs[0].sandboxId), 404);
    await Promise.all([client.deleteSandbox(reqs[1].sandboxId), client.deleteSandbox(reqs[2].sandboxId)]);
    await t.assertClean();
  });
});

describe('node agent failures and admission', () => {
  let env: TestEnv;

  before(async () => { env = await makeTestEnv('adm', '10.201.2.0/24'); });
  after(async () => { await env?.cleanup(); });

  it('rolls back everything when runsc fails mid-create, and keeps serving', async () => {
    const wrapper = join(env.dir, 'runsc-failing-run');
    await writeFile(wrapper, '#!/bin/sh\nfor a in "$@"; do [ "$a" = run ] && { echo "simulated runsc failure" >&2; exit 3; }; done\nexec runsc "$@"\n');
    await chmod(wrapper, 0o755);
    const cfg = env.config({ state_dir: join(env.dir, 'state-fail') });
    const tag = new ResourceNames(cfg.node_agent.state_dir).tag;
    const agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, runscPath: wrapper });
    try {
      const client = new NodeAgentClient(agent.url);
      const req = createRequest(env);
      await rejects(client.createSandbox(req), 500, /simulated runsc failure/);
      await rejects(client.getSandbox(req.sandboxId), 404);
      assertNothingLeft(await agent.settled().then(() => leftovers(cfg.node_agent.state_dir, tag)));
      assert.equal((await client.info()).sandboxes.running, 0);
      // The same id can be created again once the cause is gone (here: it fails the same way, cleanly).
      await rejects(client.createSandbox(req), 500);
    } finally {
      await agent.close({ destroySandboxes: true });
    }
    assertNothingLeft(await leftovers(cfg.node_agent.state_dir, tag));
  });

  it('refuses a resume the release ratio cannot admit, with the exact message', async () => {
    const cfg = env.config({ state_dir: join(env.dir, 'state-ratio'), capacity: { cpu_count: 2, memory_mb: 400 }, host: { quota: { paused_resource_release_ratio: 1, memory_overcommit: 1, memory_reserve_mb: 0, max_cpu_pressure: 0, max_connections_per_sandbox: 8192 } } });
    const tag = new ResourceNames(cfg.node_agent.state_dir).tag;
    const agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path });
    try {
      const client = new NodeAgentClient(agent.url);
      assert.equal((await client.info()).pausedResourceReleaseRatio, 1);
      const a = await client.createSandbox(createRequest(env));
      await client.pauseSandbox(a.sandboxId);
      const b = await client.createSandbox(createRequest(env));
      const e = await rejects(client.resumeSandbox(a.sandboxId), 409);
      assert.equal(e.code, 130409);
      assert.equal(e.message, 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 144MB');
      assert.equal((await client.getSandbox(a.sandboxId)).state, 'paused');
      await client.deleteSandbox(b.sandboxId);
      assert.equal((await client.resumeSandbox(a.sandboxId)).state, 'running');
      await client.deleteSandbox(a.sandboxId);
    } finally {
      await agent.close({ destroySandboxes: true });
    }
    assertNothingLeft(await leftovers(cfg.node_agent.state_dir, tag));
  });
});
