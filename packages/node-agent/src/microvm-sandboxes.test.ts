/**
 * The node agent on the microvm runtime (QEMU; TCG where KVM is missing), one agent for the whole
 * story: a guest booted, paused to a file with no QEMU left, adopted by a restarted agent and
 * resumed; creates from the template's saved guest (clock, random numbers, envd's after-restore
 * helper, the sealed memory file); snapshots that hold the machine; volumes over virtiofs; and a
 * paused sandbox killed. The node offering both runtimes is in microvm-runtimes.test.ts, the
 * warm pool in microvm-warm-pool.test.ts. Skipped without QEMU or a guest kernel.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
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
import { microvmMissing, qemuProcesses, until } from './testing/microvm-host.ts';
import { templateMemoryChecksum } from './runtime/microvm/template-memory.ts';

const LOCAL_PLUGIN = fileURLToPath(new URL('../../volumes/src/local-plugin/binary-main.ts', import.meta.url));

const get = async (url: string) => {
  const r = await fetch(url, { signal: AbortSignal.timeout(3_000) });
  return r.ok ? (await r.text()).trim() : undefined;
};

// Under TCG (no KVM here) a guest boots in seconds, not milliseconds: one sandbox carries the whole story.
describe('node agent on the microvm runtime (QEMU; TCG where KVM is missing)', { skip: microvmMissing ?? false }, () => {
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
