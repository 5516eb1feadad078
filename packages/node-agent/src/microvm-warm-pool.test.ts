/**
 * The node agent's microvm warm pool: clones parked on their template's memory file, holding no
 * guest page until handed out personalised, refilled from the saved guest, and a cold start when
 * the parked QEMU died. Skipped without QEMU or a guest kernel.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { assertNothingLeft, createRequest, leftovers, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';
import { microvmMissing, qemuProcesses, until } from './testing/microvm-host.ts';
import { templateMemoryChecksum } from './runtime/microvm/template-memory.ts';

describe('the microvm warm pool: clones parked on their template\'s memory file', { skip: microvmMissing ?? false }, () => {
  let env: TestEnv;
  let agent: NodeAgent | undefined;
  let stateDir: string;
  let tag: string;

  before(async () => {
    env = await makeTestEnv('mvmw', '10.201.11.0/24');
    const cfg = env.config({ runtime: 'microvm', warm_pool_size: 1, warm_pool_initial: 1, warm_pool_max: 1 });
    stateDir = cfg.node_agent.state_dir;
    tag = new ResourceNames(stateDir).tag;
    agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
  });

  after(async () => {
    await agent?.close({ destroySandboxes: true });
    if (stateDir) assertNothingLeft(await leftovers(stateDir, tag));
    await env?.cleanup();
  });

  /** The QEMU of the pool's one parked clone, with what its process holds. */
  const parkedClone = async () => {
    const [pid] = await qemuProcesses(stateDir);
    if (!pid || agent!.warmCount() !== 1) return undefined;
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
    return { pid, rssMB: Number(/^Rss:\s+(\d+) kB/m.exec(rollup)?.[1]) / 1024 };
  };

  it('fills with a parked clone holding no guest page, hands it out personalised, refills, and starts cold when the parked QEMU died', async () => {
    const client = new NodeAgentClient(agent!.url);
    const { artifactId, ...rest } = env.artifact;
    await client.ensureArtifact(artifactId, rest);
    // The template's saved guest is made first (a boot under TCG), then the clone is parked on it.
    const first = await until('a parked clone', parkedClone, 240_000);
    assert.ok(first.rssMB < 128, `a parked clone's QEMU holds ${first.rssMB} MB; the guest's 256 MB are not read yet`);

    const a = await client.createSandbox(createRequest(env, { envVars: { WARM: 'parked' }, envdAccessToken: 'tok-a', timeoutMs: 120_000 }));
    const rec = agent!.inspect(a.sandboxId);
    const log = await readFile(join(rec.dir, 'console.log'), 'utf8');
    assert.match(log, /warm sandbox waiting on its template's saved guest/);
    assert.match(log, /warm sandbox handed out/);
    assert.match(log, /warm-up command done/, 'the template guest ran envd\'s warm-up before it was saved');
    const envs = await (await fetch(`http://${a.address}:49983/envs`, { headers: { 'x-access-token': 'tok-a' } })).json() as Record<string, string>;
    assert.equal(envs.WARM, 'parked');
    assert.equal(envs.E2B_SANDBOX_ID, a.sandboxId);
    const guestNow = Number((await agent!.exec(a.sandboxId, ['date', '+%s'])).stdout);
    assert.ok(Math.abs(guestNow - Date.now() / 1000) < 5, `guest clock ${guestNow} vs host ${Date.now() / 1000}`);

    // The pool refills from the saved guest it has (no boot); the next clone draws its own random numbers.
    await until('the pool to refill', parkedClone, 60_000);
    const b = await client.createSandbox(createRequest(env, { envdAccessToken: 'tok-b', timeoutMs: 120_000 }));
    const draw = async (id: string) => (await agent!.exec(id, ['busybox', 'od', '-An', '-tx1', '-N16', '/dev/urandom'])).stdout.trim();
    assert.notEqual(await draw(a.sandboxId), await draw(b.sandboxId));
    assert.match(await readFile(join(agent!.inspect(b.sandboxId).dir, 'console.log'), 'utf8'), /warm sandbox handed out/);

    // A parked QEMU that died: the create is not refused, it starts otherwise.
    const parked = await until('the pool to refill again', parkedClone, 60_000);
    const running = new Set([a, b].map((s) => agent!.inspect(s.sandboxId).dir));
    const pids = await qemuProcesses(stateDir);
    for (const pid of pids) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      if (![...running].some((d) => cmdline.includes(d))) process.kill(pid, 'SIGKILL');
    }
    assert.ok(parked.pid);
    const c = await client.createSandbox(createRequest(env, { envVars: { AFTER: 'kill' }, timeoutMs: 120_000 }));
    assert.equal((await agent!.exec(c.sandboxId, ['sh', '-c', 'echo $AFTER'])).stdout.trim(), 'kill');

    const templates = join(stateDir, 'guest', 'templates');
    for (const key of (await readdir(templates)).filter((n) => !n.includes('.tmp-'))) {
      const sum = await templateMemoryChecksum(join(templates, key));
      assert.equal(sum.now, sum.recorded, 'no clone wrote into the template\'s memory file');
    }
    for (const sb of [a, b, c]) await client.deleteSandbox(sb.sandboxId);
  });
});
