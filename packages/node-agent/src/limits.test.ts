import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { envdHealthy } from './envd-client.ts';
import { hostTaskLimit, taskCaps } from './runtime/host-tasks.ts';
import { sandboxLimits } from './runtime/sandbox-limits.ts';
import type { NodeAgent } from './index.ts';
import { createRequest, startAgentUnderTest, type AgentUnderTest, type TestEnv } from './testing/fixtures.ts';

/** Node inside the sandbox: the runtime at /.svc brings it (the busybox image has no python). */
const NODE = ['/.svc/lib/ld-linux-x86-64.so.2', '--library-path', '/.svc/lib', '/.svc/bin/node'];

/** Runs a command through envd's process API (Connect, JSON), as the SDK does: a child of envd, under its limits. */
async function envdRun(address: string, cmd: string, args: string[]): Promise<{ stdout: string; stderr: string; exitCode: number | undefined }> {
  const body = Buffer.from(JSON.stringify({ process: { cmd, args } }));
  const head = Buffer.alloc(5);
  head.writeUInt32BE(body.length, 1);
  const res = await fetch(`http://${address}:49983/process.Process/Start`, {
    method: 'POST', body: Buffer.concat([head, body]), headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1' },
  });
  const raw = Buffer.from(await res.arrayBuffer());
  let stdout = '';
  let stderr = '';
  let exitCode: number | undefined;
  for (let off = 0; off + 5 <= raw.length;) {
    const size = raw.readUInt32BE(off + 1);
    const msg = JSON.parse(raw.subarray(off + 5, off + 5 + size).toString('utf8')) as {
      event?: { data?: { stdout?: string; stderr?: string }; end?: { exitCode?: number } };
    };
    off += 5 + size;
    if (msg.event?.data?.stdout) stdout += Buffer.from(msg.event.data.stdout, 'base64').toString();
    if (msg.event?.data?.stderr) stderr += Buffer.from(msg.event.data.stderr, 'base64').toString();
    if (msg.event?.end) exitCode = msg.event.end.exitCode ?? 0;
  }
  return { stdout, stderr, exitCode };
}


describe('sandbox limits behave like a VM (real runsc)', () => {
  let t: AgentUnderTest;
  let env: TestEnv;
  let agent: NodeAgent;
  let client: NodeAgentClient;
  let stateDir: string;
  let tag: string;

  before(async () => {
    t = await startAgentUnderTest('lim', '10.212.1.0/24');
    ({ env, agent, client, stateDir, tag } = t);
  });

  after(() => t?.close());

  const cgroupFile = (sandboxId: string, controller: string, file: string) =>
    `/sys/fs/cgroup/${controller}/svc-${tag}/svc-${tag}-${agent.inspect(sandboxId).instanceId}/${file}`;

  /** The sandbox is alive and well: envd answers and a new command runs. */
  async function assertAnswers(sandboxId: string) {
    assert.ok(await envdHealthy(agent.inspect(sandboxId).address, 2_000), 'envd does not answer');
    const r = await agent.exec(sandboxId, ['echo', 'still here']);
    assert.equal(r.stdout.trim(), 'still here', `next command failed: ${r.stderr}`);
  }

  it('kills a process that fills memory inside the sandbox, not the sandbox', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256 }));
    try {
      // The sandbox sees its own size; the host cgroup has headroom above it.
      assert.match((await agent.exec(sb.sandboxId, ['cat', '/proc/meminfo'])).stdout, /MemTotal:\s+262144 kB/);
      const hostLimit = Number(await readFile(cgroupFile(sb.sandboxId, 'memory', 'memory.limit_in_bytes'), 'utf8'));
      assert.ok(hostLimit > 256 * 1024 * 1024, `host limit ${hostLimit}`);

      const hogs = {
        buffers: 'const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1));',
        pages: 'const a = []; for (;;) { const b = new Uint8Array(64 << 20); for (let i = 0; i < b.length; i += 4096) b[i] = 1; a.push(b); }',
        oneBlock: 'const b = Buffer.alloc(2 * 1024 ** 3 - 1, 1); console.log(b.length);',
      };
      for (const [name, code] of Object.entries(hogs)) {
        const t0 = performance.now();
        const r = await agent.exec(sb.sandboxId, [...NODE, '-e', code]);
        assert.notEqual(r.code, 0, `${name}: the hog was not stopped`);
        console.log(`# ${name}: stopped with code ${r.code} after ${Math.round(performance.now() - t0)} ms`);
        await assertAnswers(sb.sandboxId);
      }
      assert.equal(Number(/^oom_kill (\d+)$/m.exec(await readFile(cgroupFile(sb.sandboxId, 'memory', 'memory.oom_control'), 'utf8'))?.[1]), 0, 'the host OOM killer struck');
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });

  it('a fork storm gets EAGAIN inside; the sandbox answers', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256 }));
    try {
      const t0 = performance.now();
      // Through envd, as a user's command runs: RLIMIT_NPROC comes down from PID 1 (a `runsc exec` beside envd does not get it).
      const r = await envdRun(sb.address, '/bin/sh', ['-c',
        // The inner shell dies on its first failed fork; the outer one then uses builtins only
        // (it could not fork either) and ends the storm by signalling its process group.
        'sh -c \'n=0; while [ $n -lt 400 ]; do sleep 60 >/dev/null 2>&1 & n=$((n+1)); echo $n > /tmp/n; done\' 2>/tmp/err; ' +
        'read n < /tmp/n; read e < /tmp/err; echo "started $n"; echo "$e"; trap "" TERM; kill 0']);
      console.log(`# fork storm: ${r.stdout.trim().replace(/\n/g, ' | ')} in ${Math.round(performance.now() - t0)} ms`);
      assert.match(r.stdout + r.stderr, /Resource temporarily unavailable|can't fork|Cannot fork/i);
      const started = Number(/started (\d+)/.exec(r.stdout)?.[1]);
      assert.ok(started < 400, `all ${started} forks succeeded`);
      await assertAnswers(sb.sandboxId);
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });

  it('a sandbox the host OOM killer stops is reported as ended with reason oom', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256 }));
    // Take the headroom away so the host, not envd's guard, acts first: what a runaway outside
    // the sandbox's own accounting (e.g. ptrace stubs) would do.
    await writeFile(cgroupFile(sb.sandboxId, 'memory', 'memory.limit_in_bytes'), String(64 * 1024 * 1024));
    await agent.exec(sb.sandboxId, [...NODE, '-e', 'const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1));']).catch(() => { /* the kill of the sandbox cuts the exec: expected */ });
    for (let i = 0; i < 50 && (await envdHealthy(sb.address, 300)); i++) await new Promise((r) => setTimeout(r, 100));
    await agent.sweepDead();
    const ended = (await client.listEndedSandboxes()).find((e) => e.sandboxId === sb.sandboxId);
    assert.equal(ended?.reason, 'oom', JSON.stringify(ended));
    await assert.rejects(client.getSandbox(sb.sandboxId), /ran out of memory/);
  });

  it('caps host tasks: every sandbox together and each one (pids.max), from the host\'s limits', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256 }));
    try {
      const want = taskCaps(await hostTaskLimit(), sandboxLimits({ memoryMB: 256, cpuCount: 1, diskSizeMB: 1024 }).maxProcesses);
      assert.equal(Number(await readFile(cgroupFile(sb.sandboxId, 'pids', 'pids.max'), 'utf8')), want.perSandbox);
      assert.equal(Number(await readFile(`/sys/fs/cgroup/pids/svc-${tag}/pids.max`, 'utf8')), want.allSandboxes);
      assert.ok(want.perSandbox < want.allSandboxes, JSON.stringify(want));
      await assertAnswers(sb.sandboxId);
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });

  it('a process bomb that meets the host cap ends its sandbox with reason pids_limit, and a read says why', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256 }));
    // RLIMIT_NPROC is per uid, and root inside may switch uids: each uid a fresh allowance. The
    // real cap leaves room for the sandbox's whole process limit; lowered here so that the test
    // meets it in seconds, as a bomb over enough uids meets the real one.
    const used = Number(await readFile(cgroupFile(sb.sandboxId, 'pids', 'pids.current'), 'utf8'));
    await writeFile(cgroupFile(sb.sandboxId, 'pids', 'pids.max'), String(used + 300));
    const bomb = "const { spawn } = require('node:child_process'); for (let uid = 1000; uid < 1020; uid++) for (let i = 0; i < 100; i++) " +
      "{ try { spawn('/bin/sleep', ['600'], { uid, gid: uid, stdio: 'ignore' }).on('error', () => {}); } catch {} } setTimeout(() => {}, 60000);";
    const t0 = performance.now();
    void agent.exec(sb.sandboxId, [...NODE, '-e', bomb]).catch(() => { /* the end of the sandbox cuts the exec: expected */ });
    for (let i = 0; i < 300 && (await envdHealthy(sb.address, 300)); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(await envdHealthy(sb.address, 1_000), false, 'the sandbox outlived its host task cap');
    console.log(`# bomb: the sandbox (${used} host tasks idle, capped at ${used + 300}) ended within ${Math.round(performance.now() - t0)} ms`);
    await agent.sweepDead();
    const ended = (await client.listEndedSandboxes()).find((e) => e.sandboxId === sb.sandboxId);
    assert.equal(ended?.reason, 'pids_limit', JSON.stringify(ended));
    await assert.rejects(client.getSandbox(sb.sandboxId), /host tasks/);
  });

  it('caps the writable layer at diskSizeMB: ENOSPC inside, df shows the cap', async () => {
    const sb = await client.createSandbox(createRequest(env, { diskSizeMB: 64 }));
    try {
      const df = await agent.exec(sb.sandboxId, ['/bin/busybox', 'df', '-m', '/']);
      const size = Number(df.stdout.trim().split('\n').pop()!.trim().split(/\s+/)[1]);
      assert.ok(size >= 55 && size <= 64, `df / says ${size} MB: ${df.stdout}`);
      const r = await agent.exec(sb.sandboxId, ['/bin/busybox', 'dd', 'if=/dev/zero', 'of=/root/big', 'bs=1M', 'count=100']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr + r.stdout, /No space left on device/);
      const written = Number((await agent.exec(sb.sandboxId, ['/bin/busybox', 'stat', '-c', '%s', '/root/big'])).stdout.trim());
      assert.ok(written > 50 * 1024 * 1024 && written <= 64 * 1024 * 1024, `wrote ${written} bytes`);
      await assertAnswers(sb.sandboxId);
      const m = await client.metrics(sb.sandboxId);
      assert.ok(m.diskUsed > 50 * 1024 * 1024, `metrics say ${m.diskUsed} bytes used`);
      await agent.exec(sb.sandboxId, ['rm', '/root/big']);
      await assertAnswers(sb.sandboxId);
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });

  it('/tmp is on the sandbox disk: 700 MB in a 256 MB sandbox is written, sticky 1777, and a full disk is ENOSPC there', async () => {
    const sb = await client.createSandbox(createRequest(env, { memoryMB: 256, diskSizeMB: 1024 }));
    try {
      assert.equal((await agent.exec(sb.sandboxId, ['/bin/busybox', 'stat', '-c', '%a', '/tmp'])).stdout.trim(), '1777');
      const r = await agent.exec(sb.sandboxId, ['/bin/busybox', 'dd', 'if=/dev/zero', 'of=/tmp/big', 'bs=1M', 'count=700']);
      assert.equal(r.code, 0, `dd into /tmp failed: ${r.stderr}`);
      assert.equal((await agent.exec(sb.sandboxId, ['/bin/busybox', 'stat', '-c', '%s', '/tmp/big'])).stdout.trim(), String(700 * 1024 * 1024));
      await assertAnswers(sb.sandboxId);
      const m = await client.metrics(sb.sandboxId);
      assert.ok(m.diskUsed > 650 * 1024 * 1024, `the disk holds it: metrics say ${m.diskUsed} bytes used`);
      assert.ok(m.memUsed < 200 * 1024 * 1024, `memory does not: ${m.memUsed} bytes used`);
      // The rest of the 1 GB disk: ENOSPC, not the memory guard.
      const full = await agent.exec(sb.sandboxId, ['/bin/busybox', 'dd', 'if=/dev/zero', 'of=/tmp/more', 'bs=1M', 'count=500']);
      assert.notEqual(full.code, 0);
      assert.match(full.stderr + full.stdout, /No space left on device/);
      await assertAnswers(sb.sandboxId);
    } finally {
      await client.deleteSandbox(sb.sandboxId);
    }
  });
});
