import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { LocalVolumes } from '@svc/volumes';
import type { VolumeMountOnNode } from '@svc/contracts/volumes';
import { listMountPoints } from './host/mounts.ts';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { envdHealthy, envdRequest } from './envd-client.ts';
import { startNodeAgent, type NodeAgent } from './index.ts';
import { ResourceNames } from './names.ts';
import { assertNothingLeft, createRequest, leftovers, makeTestEnv, testLogger, type TestEnv } from './testing/fixtures.ts';
import { DEFAULT_GUEST_KERNEL_DIR } from './runtime/microvm/guest-assets.ts';
import { templateMemoryChecksum } from './runtime/microvm/template-memory.ts';

const QEMU = 'qemu-system-x86_64';
const LOCAL_PLUGIN = fileURLToPath(new URL('../../volumes/src/local-plugin/binary-main.ts', import.meta.url));
const missing = spawnSync(QEMU, ['--version']).status !== 0 ? `${QEMU} is missing (scripts/install-system-deps.sh installs qemu-system-x86)`
  : !existsSync(join(DEFAULT_GUEST_KERNEL_DIR, 'vmlinuz')) ? `no guest kernel in ${DEFAULT_GUEST_KERNEL_DIR} (scripts/guest-kernel.sh installs it)` : undefined;

/** QEMU processes whose command line names this state dir. */
async function qemuProcesses(stateDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => { /* it ended while /proc was read */ return ''; });
    if (cmdline.startsWith(QEMU) && cmdline.includes(stateDir)) pids.push(Number(pid));
  }
  return pids;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn().catch(() => { /* not yet: tried again until the deadline, which names what was awaited */ return undefined; });
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const get = async (url: string) => {
  const r = await fetch(url, { signal: AbortSignal.timeout(3_000) });
  return r.ok ? (await r.text()).trim() : undefined;
};

// Under TCG (no KVM here) a guest boots in seconds, not milliseconds: one sandbox carries the whole story.
describe('node agent on the microvm runtime (QEMU; TCG where KVM is missing)', { skip: missing ?? false }, () => {
  let env: TestEnv;
  let agent: NodeAgent | undefined;
  let stateDir: string;
  let tag: string;
  let cfg: ReturnType<TestEnv['config']>;

  before(async () => {
    env = await makeTestEnv('mvm', '10.201.9.0/24');
    // The local volume plugin, run from source as a binary plugin.
    const plugin = join(env.dir, 'local-plugin');
    await writeFile(plugin, `#!/bin/sh\nSVC_LOCAL_VOLUME_ROOT='${join(env.dir, 'volume-data')}' exec '${process.execPath}' --import tsx '${LOCAL_PLUGIN}' "$@"\n`, { mode: 0o755 });
    cfg = env.config({ runtime: 'microvm', volume_plugin_base_dir: join(env.dir, 'volume-base'), volume_plugins: [{ name: 'local', type: 'binary', binary_path: plugin }] });
    stateDir = cfg.node_agent.state_dir;
    tag = new ResourceNames(stateDir).tag;
    agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
  });

  after(async () => {
    await agent?.close({ destroySandboxes: true });
    await env?.cleanup();
  });

  it('boots a guest, runs commands, pauses to a file with no QEMU left, survives an agent restart, resumes with its processes and server, and is killed leaving nothing', async () => {
    let client = new NodeAgentClient(agent!.url);
    const req = createRequest(env, { envVars: { GREETING: 'hello' }, memoryMB: 256, timeoutMs: 120_000 });
    const sb = await client.createSandbox(req);
    assert.equal(sb.runtime, 'microvm');
    // The first create makes the template's saved guest in the background, with a QEMU of its
    // own: the counts of QEMU processes below are this sandbox's once it is done (under a loaded
    // CI it was still running at the pause twice).
    await agent!.settled();
    assert.ok(await envdHealthy(sb.address));
    const envs = await (await fetch(`http://${sb.address}:49983/envs`)).json() as Record<string, string>;
    assert.equal(envs.GREETING, 'hello');

    // A real kernel of its own: the guest's, not the host's, with the memory asked for.
    const uname = await agent!.exec(sb.sandboxId, ['busybox', 'uname', '-r']);
    assert.equal(uname.code, 0, uname.stderr);
    assert.notEqual(uname.stdout.trim(), spawnSync('uname', ['-r']).stdout.toString().trim());
    const meminfo = await agent!.exec(sb.sandboxId, ['cat', '/proc/meminfo']);
    const totalMB = Number(/MemTotal:\s+(\d+)/.exec(meminfo.stdout)?.[1]) / 1024;
    assert.ok(totalMB > 180 && totalMB <= 256, `guest memory ${totalMB} MB`);
    const df = await agent!.exec(sb.sandboxId, ['busybox', 'df', '-m', '/']);
    assert.match(df.stdout, /overlay/);

    // A file, a counter in the background, and an HTTP server on a port of the sandbox's.
    assert.equal((await agent!.exec(sb.sandboxId, ['sh', '-c', 'echo kept > /root/file && mkdir -p /www && echo served > /www/index.html'])).code, 0);
    await agent!.exec(sb.sandboxId, ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done'], { detach: true });
    await agent!.exec(sb.sandboxId, ['busybox', 'httpd', '-f', '-p', '8080', '-h', '/www'], { detach: true });
    assert.equal(await until('the server', () => get(`http://${sb.address}:8080/`)), 'served');
    // The counter's shell starts in the background: on a busy host its first write may come after the server's.
    const before = await until('the counter', async () => {
      const n = Number((await agent!.exec(sb.sandboxId, ['cat', '/tmp/count'])).stdout);
      return n > 0 ? n : undefined;
    });

    const paused = await client.pauseSandbox(sb.sandboxId);
    assert.equal(paused.state, 'paused');
    assert.equal(paused.pauseKind, 'snapshot');
    assert.ok((paused.snapshotBytes ?? 0) > 1_000_000, `snapshot of ${paused.snapshotBytes} bytes`);
    assert.deepEqual(await qemuProcesses(stateDir), [], 'a paused microvm leaves no QEMU process');
    assert.equal(await envdHealthy(sb.address, 500), false);

    // The agent goes away and comes back: the paused sandbox is adopted from its files.
    await agent!.close();
    agent = await startNodeAgent(cfg, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path, livenessIntervalMs: 60_000 });
    client = new NodeAgentClient(agent.url);
    assert.equal((await client.getSandbox(sb.sandboxId)).state, 'paused');

    const resumed = await client.resumeSandbox(sb.sandboxId);
    assert.equal(resumed.state, 'running');
    assert.equal((await qemuProcesses(stateDir)).length, 1);
    assert.equal(await until('the server after resume', () => get(`http://${sb.address}:8080/`)), 'served');
    const after = Number((await agent.exec(sb.sandboxId, ['cat', '/tmp/count'])).stdout);
    assert.ok(after >= before, `the counter went on from ${before} (now ${after})`);
    await until('the counter to move', async () => (Number((await agent!.exec(sb.sandboxId, ['cat', '/tmp/count'])).stdout) > after ? true : undefined));
    assert.equal((await agent.exec(sb.sandboxId, ['cat', '/root/file'])).stdout.trim(), 'kept');

    await client.deleteSandbox(sb.sandboxId);
    assert.deepEqual(await qemuProcesses(stateDir), []);
    assertNothingLeft(await leftovers(stateDir, tag));
  });

  it('creates from the template\'s saved guest: its clock is the host\'s and its random numbers its own', async () => {
    const client = new NodeAgentClient(agent!.url);
    await agent!.settled(); // the saved guest the first cold create asked for
    // Its clock stood still since the save: let that be further off than the check below allows.
    const templates = join(stateDir, 'guest', 'templates');
    const [key] = (await readdir(templates)).filter((n) => !n.includes('.tmp-'));
    const saved = join(templates, key);
    const wait = Math.max(0, (await stat(join(saved, 'memory.state'))).mtimeMs + 6_000 - Date.now());
    await new Promise((r) => setTimeout(r, wait));
    const a = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000 }));
    const b = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000 }));
    try {
      for (const sb of [a, b]) {
        const log = await readFile(join(agent!.inspect(sb.sandboxId).dir, 'console.log'), 'utf8');
        assert.match(log, /restored from its template's saved guest/);
        const guestNow = Number((await agent!.exec(sb.sandboxId, ['date', '+%s'])).stdout);
        assert.ok(Math.abs(guestNow - Date.now() / 1000) < 5, `guest clock ${guestNow} vs host ${Date.now() / 1000}`);
      }
      const draw = async (id: string) => (await agent!.exec(id, ['busybox', 'od', '-An', '-tx1', '-N16', '/dev/urandom'])).stdout.trim();
      assert.notEqual(await draw(a.sandboxId), await draw(b.sandboxId), 'guests restored from one saved state draw their own random numbers');
      // envd's own draws too: its generators' state is the template's in every clone, so it reads the kernel's pool.
      const watcherId = async (address: string) => JSON.parse((await envdRequest(address, 'POST', '/filesystem.Filesystem/CreateWatcher', { timeoutMs: 10_000, body: { path: '/tmp', recursive: false } })).body).watcherId as string;
      const [wa, wb] = [await watcherId(a.address), await watcherId(b.address)];
      assert.match(wa, /^w[0-9a-f]{16}$/);
      assert.notEqual(wa, wb, 'envd in two clones of one template draws different watcher ids');
      // The renewal is envd's route to the helper it started at boot, the real svc-sudo: a day ahead and back.
      const renew = (timeMs: number) => envdRequest(a.address, 'POST', '/svc/after-restore', { timeoutMs: 10_000, body: { timeMs, seed: 'ab'.repeat(16) } });
      assert.equal((await renew(Date.now() + 86_400_000)).status, 204);
      assert.ok(Math.abs(Number((await agent!.exec(a.sandboxId, ['date', '+%s'])).stdout) - Date.now() / 1000 - 86_400) < 5, 'the guest clock was set a day ahead');
      assert.equal((await renew(Date.now())).status, 204);
      assert.equal((await renew(0)).status, 400);
      // Its helper killed in the guest, envd starts svc-sudo --after-restore for each renewal instead.
      const killed = await agent!.exec(a.sandboxId, ['sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null | grep -q "after-restore-servic[e]" && kill -9 ${p#/proc/} && k=1; done; [ -n "$k" ]']);
      assert.equal(killed.code, 0, killed.stderr);
      await until('envd saw its helper end', async () => (/after-restore helper ended/.test(await readFile(join(agent!.inspect(a.sandboxId).dir, 'console.log'), 'utf8')) ? true : undefined), 10_000);
      assert.equal((await renew(Date.now() + 2 * 86_400_000)).status, 204);
      assert.ok(Math.abs(Number((await agent!.exec(a.sandboxId, ['date', '+%s'])).stdout) - Date.now() / 1000 - 2 * 86_400) < 5, 'the one-shot form set the clock');
      assert.equal((await renew(Date.now())).status, 204);
      // Its own address, reached from the host, and its own files.
      await agent!.exec(a.sandboxId, ['sh', '-c', 'echo a > /root/who']);
      assert.equal((await agent!.exec(b.sandboxId, ['sh', '-c', 'cat /root/who 2>/dev/null || echo none'])).stdout.trim(), 'none');
      assert.ok(await envdHealthy(a.address) && await envdHealthy(b.address));

      // Both map the template's sealed memory file copy-on-write; its saved state is device state only.
      assert.equal((await stat(join(saved, 'memory.ram'))).mode & 0o777, 0o444);
      assert.ok((await stat(join(saved, 'memory.state'))).size < 8_000_000, 'the template\'s saved state holds no RAM');
      for (const sb of [a, b]) {
        const launch = JSON.parse(await readFile(join(agent!.inspect(sb.sandboxId).dir, 'launch.json'), 'utf8')) as { argv: string[] };
        assert.ok(launch.argv.some((x) => x.startsWith('memory-backend-file,') && x.includes(`mem-path=${join(saved, 'memory.ram')},share=off`)), launch.argv.join(' '));
      }
      // A clone's pause writes its own pages and resumes without the template's file.
      await client.pauseSandbox(a.sandboxId);
      const own = JSON.parse(await readFile(join(agent!.inspect(a.sandboxId).dir, 'launch.json'), 'utf8')) as { argv: string[] };
      assert.ok(own.argv.some((x) => x.startsWith('memory-backend-ram,id=mem,')) && !own.argv.some((x) => x.includes('memory.ram')), own.argv.join(' '));
      await client.resumeSandbox(a.sandboxId);
      assert.equal((await agent!.exec(a.sandboxId, ['cat', '/root/who'])).stdout.trim(), 'a');
      const sum = await templateMemoryChecksum(saved);
      assert.equal(sum.now, sum.recorded, 'the clones wrote nothing into the template\'s memory file');
    } finally {
      await client.deleteSandbox(a.sandboxId);
      await client.deleteSandbox(b.sandboxId);
    }
  });

  it('a snapshot holds the machine: a sandbox made from it goes on with its processes and server; files only when asked', async () => {
    const client = new NodeAgentClient(agent!.url);
    const origin = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000, envdAccessToken: 'origin-token' }));
    const made: string[] = [origin.sandboxId];
    try {
      await agent!.exec(origin.sandboxId, ['sh', '-c', 'mkdir -p /www && echo from-origin > /www/index.html && echo kept > /root/file']);
      await agent!.exec(origin.sandboxId, ['busybox', 'httpd', '-f', '-p', '8080', '-h', '/www'], { detach: true });
      assert.equal(await until('the origin server', () => get(`http://${origin.address}:8080/`)), 'from-origin');
      const layer = await client.snapshotSandbox(origin.sandboxId, { layerId: 'mvm-machine-1' });
      assert.equal(layer.contents, 'memory');
      assert.equal((await client.getSandbox(origin.sandboxId)).state, 'running');
      assert.equal(await until('the origin server after the snapshot', () => get(`http://${origin.address}:8080/`)), 'from-origin');

      const child = await client.createSandbox({ ...createRequest(env, { memoryMB: 256, timeoutMs: 120_000, envdAccessToken: 'child-token' }), layer: { layerId: layer.layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes } });
      made.push(child.sandboxId);
      // The server the origin started answers in the child, at the child's own address, with no command run there.
      assert.equal(await until('the server in the child', () => get(`http://${child.address}:8080/`)), 'from-origin');
      assert.equal((await agent!.exec(child.sandboxId, ['cat', '/root/file'])).stdout.trim(), 'kept');
      // The child's envd takes the child's token, not the origin's.
      const envs = (token: string) => fetch(`http://${child.address}:49983/envs`, { headers: { 'X-Access-Token': token } }).then((r) => r.status);
      assert.equal(await envs('child-token'), 200);
      assert.equal(await envs('origin-token'), 401);

      // Another shape than the machine's is refused; a files-only snapshot is there for builds.
      await assert.rejects(client.createSandbox({ ...createRequest(env, { memoryMB: 384, timeoutMs: 120_000 }), layer: { layerId: layer.layerId, sha256: layer.sha256, sizeBytes: layer.sizeBytes } }),
        (e: Error & { status?: number }) => e.status === 409 && /256 MB/.test(e.message));
      const files = await client.snapshotSandbox(origin.sandboxId, { layerId: 'mvm-files-1', memory: false });
      assert.equal(files.contents, 'filesystem');

      // A paused guest is captured as it lies (its pause package, docs/cluster.md), without a
      // QEMU started; restored with the origin's token, as a move to another node does.
      await agent!.settled(); // no saved guest of a template is being made beside them
      const running = (await qemuProcesses(stateDir)).length;
      assert.equal((await client.pauseSandbox(origin.sandboxId)).pauseKind, 'snapshot');
      const pkg = await client.snapshotSandbox(origin.sandboxId, { layerId: 'mvm-pause-1' });
      assert.equal(pkg.contents, 'memory');
      assert.equal((await client.getSandbox(origin.sandboxId)).state, 'paused');
      assert.equal((await qemuProcesses(stateDir)).length, running - 1, 'the paused guest\'s QEMU is gone, and the capture started none');
      const moved = await client.createSandbox({ ...createRequest(env, { memoryMB: 256, timeoutMs: 120_000, envdAccessToken: 'origin-token' }), layer: { layerId: pkg.layerId, sha256: pkg.sha256, sizeBytes: pkg.sizeBytes } });
      made.push(moved.sandboxId);
      assert.equal(await until('the server in the moved guest', () => get(`http://${moved.address}:8080/`)), 'from-origin');
      assert.equal(await fetch(`http://${moved.address}:49983/envs`, { headers: { 'X-Access-Token': 'origin-token' } }).then((r) => r.status), 200);
    } finally {
      for (const id of made) await client.deleteSandbox(id).catch(() => { /* already gone (a failed step ended it): nothing to clean up */ });
    }
  });

  it('volumes over virtiofs: shared between guests, read-only enforced, a pause without memory, nothing left mounted', async () => {
    const client = new NodeAgentClient(agent!.url);
    const local = new LocalVolumes({ root: join(env.dir, 'volume-data') });
    await local.create({ volumeId: 'vol-mvm', name: 'mvm' });
    const mount = (readOnly: boolean): VolumeMountOnNode => ({ volumeId: 'vol-mvm', driver: 'local', privateData: '', path: '/data', readOnly });
    const writer = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000, volumes: [mount(false)] }));
    const reader = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000, volumes: [mount(true)] }));
    const sh = (id: string, script: string) => agent!.exec(id, ['sh', '-c', script]);
    try {
      assert.equal((await sh(writer.sandboxId, 'echo hello > /data/note')).code, 0);
      assert.equal(await readFile(join(env.dir, 'volume-data', 'vol-mvm', 'note'), 'utf8'), 'hello\n', 'the data is the plugin\'s');
      assert.equal((await sh(reader.sandboxId, 'cat /data/note')).stdout, 'hello\n');
      for (const cmd of ['echo x > /data/new', 'rm /data/note', 'mount -o remount,rw /data && echo x > /data/new']) {
        assert.notEqual((await sh(reader.sandboxId, cmd)).code, 0, `${cmd} must fail on a read-only mount`);
      }
      // QEMU 7.2 cannot save a virtiofs device: the pause keeps files, not memory, and the boot brings the volume back.
      const paused = await client.pauseSandbox(writer.sandboxId);
      assert.equal(paused.pauseKind, 'filesystem');
      await client.resumeSandbox(writer.sandboxId, { envVars: {} });
      assert.equal((await sh(writer.sandboxId, 'cat /data/note')).stdout, 'hello\n');
    } finally {
      await client.deleteSandbox(reader.sandboxId);
      await client.deleteSandbox(writer.sandboxId);
    }
    assert.deepEqual((await listMountPoints()).filter((m) => m.startsWith(join(env.dir, 'volume-base') + '/') || m.startsWith(join(stateDir, 'instances'))), []);
    assert.equal(await readFile(join(env.dir, 'volume-data', 'vol-mvm', 'note'), 'utf8'), 'hello\n', 'a kill never touches volume data');
  });

  it('kills a paused sandbox without resuming it, and a bad kernel dir is a clear error', async () => {
    const client = new NodeAgentClient(agent!.url);
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256, timeoutMs: 120_000 }));
    await client.pauseSandbox(sb.sandboxId);
    await client.deleteSandbox(sb.sandboxId);
    assert.deepEqual(await qemuProcesses(stateDir), []);
    assertNothingLeft(await leftovers(stateDir, tag));
    await assert.rejects(startNodeAgent({ ...cfg, node_agent: { ...cfg.node_agent, state_dir: join(env.dir, 'state-2'), guest_kernel_dir: join(env.dir, 'no-kernel') } }, { logger: testLogger(), masterAddr: '', envdBundle: env.envd.path }),
      /no guest kernel at .*no-kernel\/vmlinuz/);
  });
});

describe('a node offering both runtimes (node_agent.runtime gvisor,microvm)', { skip: missing ?? false }, () => {
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

describe('the microvm warm pool: clones parked on their template\'s memory file', { skip: missing ?? false }, () => {
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
