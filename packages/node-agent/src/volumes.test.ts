import assert from 'node:assert/strict';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { SvcError } from '@svc/common';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import type { VolumeMountOnNode } from '@svc/contracts/volumes';
import { LocalVolumes } from '@svc/volumes';
import type { NodeAgent } from './index.ts';
import { createRequest, makeTestEnv, startAgentUnderTest, testLogger, type AgentUnderTest } from './testing/fixtures.ts';
import { startNodeAgent } from './index.ts';
import { listMountPoints } from './host/mounts.ts';

const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: SvcError) => e.status);
const messageOf = (p: Promise<unknown>) => p.then(() => '', (e: SvcError) => e.message);
const LOCAL_PLUGIN = fileURLToPath(new URL('../../volumes/src/local-plugin/binary-main.ts', import.meta.url));

/** Plugins as shell scripts: the local one (run from source), and ones that misbehave. */
async function writePlugins(dir: string, baseDir: string, dataRoot: string): Promise<Record<string, string>> {
  const plugins: Record<string, string> = {
    local: `#!/bin/sh\nSVC_LOCAL_VOLUME_ROOT='${dataRoot}' exec '${process.execPath}' --import tsx '${LOCAL_PLUGIN}' "$@"\n`,
    crash: '#!/bin/sh\necho "it broke" >&2\nexit 3\n',
    garbage: '#!/bin/sh\necho "this is not json"\n',
    hang: '#!/bin/sh\nexec sleep 600\n',
    // Answers a host path outside the base directory (a mount point of the host's own).
    outside: '#!/bin/sh\ncase "$*" in *"--op attach"*) echo \'{"host_path":"/etc"}\';; *) echo \'{}\';; esac\n',
  };
  const out: Record<string, string> = {};
  await mkdir(join(dir, 'plugins'), { recursive: true });
  for (const [name, text] of Object.entries(plugins)) {
    out[name] = join(dir, 'plugins', name);
    await writeFile(out[name], text);
    await chmod(out[name], 0o755);
  }
  void baseDir;
  return out;
}

describe('node agent volumes: attach, share, read-only, counts, failures (real runsc)', () => {
  let t: AgentUnderTest;
  let agent: NodeAgent;
  let client: NodeAgentClient;
  let baseDir: string;
  let local: LocalVolumes;

  before(async () => {
    t = await startAgentUnderTest('volumes', '10.201.35.0/24', (env) => {
      baseDir = join(env.dir, 'volume-base');
      return {
        volume_plugin_base_dir: baseDir,
        volume_plugins: ['local', 'crash', 'garbage', 'hang', 'outside'].map((name) => ({
          name, type: 'binary' as const, binary_path: join(env.dir, 'plugins', name), ...(name === 'hang' ? { timeout_ms: 500 } : {}),
        })),
      };
    });
    ({ agent, client } = t);
    await writePlugins(t.env.dir, baseDir, join(t.env.dir, 'volume-data'));
    local = new LocalVolumes({ root: join(t.env.dir, 'volume-data') });
  });

  after(() => t?.close());

  const sh = async (sandboxId: string, script: string) => agent.exec(sandboxId, ['sh', '-c', script]);
  const mount = (volumeId: string, path: string, over: Partial<VolumeMountOnNode> = {}): VolumeMountOnNode => ({ volumeId, driver: 'local', privateData: '', path, readOnly: false, ...over });
  const mountedUnderBase = async () => (await listMountPoints()).filter((m) => m.startsWith(`${baseDir}/`));

  it('the base directory is the node\'s alone (0700): no other user of the host reaches a mounted volume through it', async () => {
    assert.equal((await stat(baseDir)).mode & 0o777, 0o700);
  });

  it('two sandboxes share a volume: the writer\'s change shows in the read-only one, which cannot write', async () => {
    await local.create({ volumeId: 'vol-shared', name: 'shared' });
    const writer = createRequest(t.env, { volumes: [mount('vol-shared', '/data')] });
    const reader = createRequest(t.env, { volumes: [mount('vol-shared', '/data/', { readOnly: true })] });
    const w = await client.createSandbox(writer);
    assert.deepEqual(w.extInfo, { volumeRefFlips: [{ volumeId: 'vol-shared', delta: 1 }] }, 'the first holder on the node flips 0 to 1');
    const r = await client.createSandbox(reader);
    assert.equal(r.extInfo, undefined, 'a second holder flips nothing');
    assert.deepEqual((await client.volumeAttachments()).map((a) => [a.volumeId, a.refCount]), [['vol-shared', 2]]);
    assert.equal((await mountedUnderBase()).length, 1, 'one host mount for both');

    assert.equal((await sh(writer.sandboxId, 'echo hello > /data/note && mkdir /data/dir')).code, 0);
    assert.equal((await sh(reader.sandboxId, 'cat /data/note')).stdout, 'hello\n');
    for (const cmd of ['echo x > /data/new', 'echo x >> /data/note', 'mv /data/note /data/moved', 'rm /data/note', 'mkdir /data/other', 'rm -r /data/dir', 'touch /data/note']) {
      const res = await sh(reader.sandboxId, cmd);
      assert.notEqual(res.code, 0, `${cmd} must fail on a read-only mount`);
    }
    assert.equal((await sh(writer.sandboxId, 'echo again > /data/note')).code, 0);
    assert.equal((await sh(reader.sandboxId, 'cat /data/note')).stdout, 'again\n', 'later writes show too');
    assert.equal(await readFile(join(t.env.dir, 'volume-data', 'vol-shared', 'note'), 'utf8'), 'again\n', 'the data is the plugin\'s');

    assert.deepEqual(await client.deleteSandbox(reader.sandboxId), {}, 'not the last holder');
    assert.deepEqual(await client.deleteSandbox(writer.sandboxId), { volumeRefFlips: [{ volumeId: 'vol-shared', delta: -1 }] });
    assert.deepEqual(await client.volumeAttachments(), []);
    assert.deepEqual(await mountedUnderBase(), [], 'the last detach tears the host mount down');
  });

  it('a filesystem pause detaches its volumes and the boot that resumes it attaches them again', async () => {
    await local.create({ volumeId: 'vol-pause', name: 'pause' });
    const req = createRequest(t.env, { volumes: [mount('vol-pause', '/work')] });
    await client.createSandbox(req);
    await sh(req.sandboxId, 'echo before > /work/f');
    const paused = await client.pauseSandbox(req.sandboxId, { memory: false });
    assert.deepEqual(paused.extInfo, { volumeRefFlips: [{ volumeId: 'vol-pause', delta: -1 }] });
    assert.equal(paused.pauseKind, 'filesystem', 'the answer shows the pause it made');
    assert.deepEqual(await client.volumeAttachments(), []);
    const resumed = await client.resumeSandbox(req.sandboxId, { envVars: {}, volumes: [mount('vol-pause', '/work')] });
    assert.deepEqual(resumed.extInfo, { volumeRefFlips: [{ volumeId: 'vol-pause', delta: 1 }] });
    assert.equal((await sh(req.sandboxId, 'cat /work/f')).stdout, 'before\n');
    // A frozen pause keeps them: its processes still hold the mount.
    assert.equal((await client.pauseSandbox(req.sandboxId)).extInfo, undefined);
    assert.deepEqual((await client.volumeAttachments()).map((a) => a.refCount), [1]);
    assert.deepEqual(await client.deleteSandbox(req.sandboxId), { volumeRefFlips: [{ volumeId: 'vol-pause', delta: -1 }] }, 'killing a frozen sandbox detaches once');
    assert.deepEqual(await mountedUnderBase(), []);
  });

  it('a plugin that crashes, prints garbage, hangs or answers a path outside the base directory fails the create, leaving nothing', async () => {
    await local.create({ volumeId: 'vol-ok', name: 'ok' });
    // The plugin's own words stay in the node's log (they may name host paths); the caller is told the plugin and the node.
    const failed = (driver: string) => new RegExp(`^the volume plugin '${driver}' could not attach volume vol-${driver} on node .*; the node's log has the detail$`);
    for (const [driver, expect] of [['crash', failed('crash')], ['garbage', failed('garbage')], ['hang', failed('hang')], ['outside', /outside volume_plugin_base_dir/]] as const) {
      // The good volume first: the bad one's failure must detach it again (rollback).
      const req = createRequest(t.env, { volumes: [mount('vol-ok', '/ok'), mount(`vol-${driver}`, '/bad', { driver })] });
      const started = Date.now();
      const message = await messageOf(client.createSandbox(req));
      assert.match(message, expect, `${driver}: ${message}`);
      assert.ok(Date.now() - started < 10_000, `${driver} failed within the hook timeout`);
      assert.equal(await statusOf(client.getSandbox(req.sandboxId)), 404);
      assert.deepEqual(await client.volumeAttachments(), [], `${driver}: nothing stays attached`);
      assert.deepEqual(await mountedUnderBase(), [], `${driver}: no host mount stays`);
    }
    await t.assertClean();
  });

  it('refuses a driver the node has no plugin for, a volume mounted twice, and a reserved mount path', async () => {
    assert.match(await messageOf(client.createSandbox(createRequest(t.env, { volumes: [mount('vol-ok', '/x', { driver: 'nfs' })] }))), /no plugin registered for driver "nfs"/);
    assert.equal(await statusOf(client.createSandbox(createRequest(t.env, { volumes: [mount('vol-ok', '/x'), mount('vol-ok', '/y')] }))), 400);
    for (const path of ['/', '/proc', '/dev/x', '/.svc', 'rel', '/a/../b']) {
      assert.equal(await statusOf(client.createSandbox(createRequest(t.env, { volumes: [mount('vol-ok', path)] }))), 400, path);
    }
    assert.deepEqual(await client.volumeAttachments(), []);
  });
});

describe('node agent volumes across an agent restart (real runsc)', () => {
  it('a sandbox kept running through a restart keeps its volume counted, and its delete detaches it', async () => {
    const env = await makeTestEnv('volrestart', '10.201.36.0/24');
    const baseDir = join(env.dir, 'volume-base');
    await writePlugins(env.dir, baseDir, join(env.dir, 'volume-data'));
    const cfg = env.config({ volume_plugin_base_dir: baseDir, volume_plugins: [{ name: 'local', type: 'binary', binary_path: join(env.dir, 'plugins', 'local') }] });
    await new LocalVolumes({ root: join(env.dir, 'volume-data') }).create({ volumeId: 'vol-kept', name: 'kept' });
    const start = () => startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
    let agent = await start();
    try {
      const req = createRequest(env, { volumes: [{ volumeId: 'vol-kept', driver: 'local', privateData: '', path: '/kept', readOnly: false }] });
      await new NodeAgentClient(agent.url).createSandbox(req);
      await agent.close();
      agent = await start();
      const client = new NodeAgentClient(agent.url);
      assert.deepEqual((await client.volumeAttachments()).map((a) => [a.volumeId, a.refCount, a.holders]), [['vol-kept', 1, [req.sandboxId]]], 'adopted with its sandbox');
      assert.equal((await agent.exec(req.sandboxId, ['sh', '-c', 'echo still > /kept/f && cat /kept/f'])).stdout, 'still\n');
      assert.deepEqual(await client.deleteSandbox(req.sandboxId), { volumeRefFlips: [{ volumeId: 'vol-kept', delta: -1 }] });
      assert.deepEqual((await listMountPoints()).filter((m) => m.startsWith(`${baseDir}/`)), []);
    } finally {
      await agent.close({ destroySandboxes: true });
      await env.cleanup();
    }
  });
});
