/**
 * The whole platform on a node offering both runtimes, microvm the default (`svc up --runtime
 * microvm,gvisor`; TCG here, where there is no KVM), driven by the official e2b SDK: create,
 * commands, files, a pause that leaves no QEMU process, a resume that brings back a background
 * process and a listening HTTP server answering through the data-plane proxy, and kill. Then a
 * create through our SDK that names gvisor gets gvisor beside it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { Sandbox as SvcSandbox } from '@svc/sdk';
import { startPlatform, useE2bEnv, diagnoseFailures, waitFor, type RunningPlatform } from './harness.ts';

const KERNEL = '/var/lib/svc/guest-kernel/current/vmlinuz';
const missing = spawnSync('qemu-system-x86_64', ['--version']).status !== 0 ? 'qemu-system-x86_64 is missing (scripts/install-system-deps.sh installs it)'
  : !existsSync(KERNEL) ? `no guest kernel at ${KERNEL} (scripts/guest-kernel.sh installs it)` : undefined;

let p: RunningPlatform | undefined;
diagnoseFailures(() => p);
before(async () => {
  if (missing) return;
  p = await startPlatform({ dataDir: '/tmp/svc-e2e-microvm', env: { SVC_RUNTIME: 'microvm,gvisor' } });
  useE2bEnv(p);
});
after(async () => { await p?.stop(); });

function qemuProcesses(dataDir: string): string[] {
  try {
    return execFileSync('pgrep', ['-a', '-f', 'qemu-system'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(dataDir));
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** The instance directory of a sandbox on the platform's node (its QEMU's command line names it). */
function instanceDirOf(dataDir: string, sandboxId: string): string {
  const instances = join(dataDir, 'node', 'instances');
  const dir = readdirSync(instances).map((id) => join(instances, id))
    .find((d) => (JSON.parse(readFileSync(join(d, 'record.json'), 'utf8')) as { sandboxId?: string }).sandboxId === sandboxId);
  assert.ok(dir, `no instance of ${sandboxId} under ${instances}`);
  return dir;
}

/** The QEMU processes of one sandbox: the warm pool's parked clones run QEMU too. */
const sandboxQemu = (dataDir: string, instanceDir: string) => qemuProcesses(dataDir).filter((l) => l.includes(`${instanceDir}/`));

async function viaProxy(sandboxId: string, port: number): Promise<{ status: number; body: string }> {
  const res = await fetch(`${p!.sandboxUrl}/`, { headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(port) }, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.text() };
}


test('the e2b SDK on microvm sandboxes: create, commands, files, pause to disk, resume with processes and a server, kill', { skip: missing ?? false }, async () => {
  const sbx = await Sandbox.create({ timeoutMs: 600_000 });
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  const instanceDir = instanceDirOf(p!.dataDir, sbx.sandboxId);
  assert.equal(sandboxQemu(p!.dataDir, instanceDir).length, 1);
  const detail = await fetch(`${p!.apiUrl}/sandboxes/${sbx.sandboxId}`, { headers: { 'X-API-Key': p!.apiKey } }).then((r) => r.json() as Promise<{ runtime?: string }>);
  assert.equal(detail.runtime, 'microvm', 'its info says which runtime runs it');

  // The guest's own kernel, and the template's user.
  const who = await sbx.commands.run('uname -r; id -un');
  assert.match(who.stdout, /^\d+\.\d+\.\d+\S*\nuser\n$/);
  assert.notEqual(who.stdout.split('\n')[0], execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim());
  await assert.rejects(sbx.commands.run('exit 3'), (e: Error & { exitCode?: number }) => e.exitCode === 3);

  await sbx.files.write('/home/user/notes.txt', 'kept across the pause');
  assert.equal(await sbx.files.read('/home/user/notes.txt'), 'kept across the pause');

  // A counter and an HTTP server in the background, reached through the data-plane proxy.
  await sbx.commands.run('mkdir -p /tmp/www && echo served > /tmp/www/index.html');
  // Written aside and renamed: a read between a truncate and its write would see an empty file
  // (CI once read "" right after the resume: 0).
  await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.2; done', { background: true });
  await sbx.commands.run('cd /tmp/www && exec python3 -m http.server 8000', { background: true });
  const served = await waitFor('the server through the proxy', async () => {
    const r = await viaProxy(sbx.sandboxId, 8000);
    return r.status === 200 ? r.body : undefined;
  });
  assert.equal(served.trim(), 'served');
  const counted = Number((await sbx.commands.run('cat /tmp/count')).stdout);

  // Pause writes the machine to disk and ends QEMU: nothing of the sandbox runs.
  await sbx.betaPause();
  assert.deepEqual(sandboxQemu(p!.dataDir, instanceDir), [], 'a paused microvm sandbox leaves no QEMU process');
  assert.equal((await sbx.getInfo()).state, 'paused');

  const back = await Sandbox.connect(sbx.sandboxId);
  assert.equal(sandboxQemu(p!.dataDir, instanceDir).length, 1);
  assert.equal(await back.files.read('/home/user/notes.txt'), 'kept across the pause');
  const r = await viaProxy(sbx.sandboxId, 8000);
  assert.equal(r.status, 200);
  assert.equal(r.body.trim(), 'served');
  const now = Number((await back.commands.run('cat /tmp/count')).stdout);
  assert.ok(now >= counted, `the counter went on from ${counted} (now ${now})`);
  await waitFor('the counter to move on', async () => (Number((await back.commands.run('cat /tmp/count')).stdout) > now ? true : undefined));

  await back.kill();
  assert.deepEqual(sandboxQemu(p!.dataDir, instanceDir), []);
  assert.equal(await Sandbox.connect(sbx.sandboxId).then(() => 'connected', (e: Error) => e.name), 'SandboxNotFoundError');
});

test('a create names its runtime: gvisor beside microvm on one node, each pausing its own way', { skip: missing ?? false }, async () => {
  const conn = { apiUrl: p!.apiUrl, apiKey: p!.apiKey, sandboxUrl: p!.sandboxUrl, timeoutMs: 300_000 };
  const g = await SvcSandbox.create('base', { ...conn, runtime: 'gvisor' });
  const m = await SvcSandbox.create('base', conn);
  try {
    assert.equal((await SvcSandbox.getInfo(g.sandboxId, conn)).runtime, 'gvisor');
    assert.equal((await SvcSandbox.getInfo(m.sandboxId, conn)).runtime, 'microvm', "no runtime named: the node's default");
    const kernels = await Promise.all([g, m].map(async (s) => (await s.commands.run('uname -r')).stdout.trim()));
    assert.notEqual(kernels[0], kernels[1]);
    await g.pause();
    await m.pause();
    assert.equal((await SvcSandbox.getInfo(g.sandboxId, conn)).pauseKind, 'freeze');
    assert.equal((await SvcSandbox.getInfo(m.sandboxId, conn)).pauseKind, 'snapshot');
    for (const s of [g, m]) {
      const back = await SvcSandbox.connect(s.sandboxId, conn);
      assert.equal((await back.commands.run('echo back')).stdout, 'back\n');
    }
    await assert.rejects(SvcSandbox.create('base', { ...conn, runtime: 'firecracker' as never }), (e: Error) => /runtime/.test(e.message));
  } finally {
    await g.kill();
    await m.kill();
  }
});
