import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QmpClient, QmpError } from './qmp.ts';

const QEMU = 'qemu-system-x86_64';
const hasQemu = spawnSync(QEMU, ['--version']).status === 0;

async function startQemu(dir: string): Promise<{ qemu: ChildProcess; socket: string }> {
  const socket = join(dir, 'qmp.sock');
  // -S: never runs guest code, so no kernel is needed; QMP answers all the same.
  const qemu = spawn(QEMU, ['-M', 'microvm', '-accel', 'tcg', '-nodefaults', '-display', 'none', '-S', '-m', '64', '-qmp', `unix:${socket},server=on,wait=off`], { stdio: 'ignore' });
  const until = Date.now() + 10_000;
  while (!existsSync(socket)) {
    if (qemu.exitCode !== null || Date.now() > until) throw new Error('QEMU did not open its QMP socket');
    await new Promise((r) => setTimeout(r, 20));
  }
  return { qemu, socket };
}

/**
 * QEMU binds the socket (the file appears) before it listens on it: a connect in between is
 * refused (seen once in .ci/run on a loaded host), so a refusal is tried again until the deadline.
 */
async function connectWhenListening(socket: string): Promise<QmpClient> {
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      return await QmpClient.connect(socket, { timeoutMs: 5_000 });
    } catch (err) {
      if (!/ECONNREFUSED/.test((err as Error).message) || Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

test('QMP against a real QEMU (microvm, TCG): commands, errors, events, and a QEMU that dies', { skip: hasQemu ? false : `${QEMU} is missing (scripts/setup.sh installs qemu-system-x86)` }, async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-qmp-'));
  const { qemu, socket } = await startQemu(dir);
  try {
    const qmp = await connectWhenListening(socket);
    const status = await qmp.execute<{ status: string; running: boolean }>('query-status');
    assert.deepEqual({ status: status.status, running: status.running }, { status: 'prelaunch', running: false });
    const version = await qmp.execute<{ qemu: { major: number } }>('query-version');
    assert.ok(version.qemu.major >= 7);
    await assert.rejects(qmp.execute('no-such-command'), (e: QmpError) => e instanceof QmpError && e.qmpClass === 'CommandNotFound');
    // Answers find their callers by id, whatever the order they are asked in.
    const both = await Promise.all([qmp.execute('query-status'), qmp.execute('query-name')]);
    assert.equal(both.length, 2);
    const stopped = qmp.waitForEvent('STOP', 5_000);
    await qmp.execute('cont');
    await qmp.execute('stop');
    assert.equal((await stopped).event, 'STOP');
    // QEMU killed: a call waiting fails at once, later ones too, nothing hangs.
    const waiting = qmp.waitForEvent('NEVER', 60_000);
    qemu.kill('SIGKILL');
    const started = Date.now();
    await assert.rejects(waiting, /closed|failed/);
    assert.ok(Date.now() - started < 5_000);
    await assert.rejects(qmp.execute('query-status'), QmpError);
  } finally {
    qemu.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
});

test('QMP: a peer that greets and never answers fails the call at its deadline; one that never greets fails connect', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'svc-qmp-'));
  const mute = join(dir, 'mute.sock');
  const silent = join(dir, 'silent.sock');
  const servers = [
    createServer((s) => s.write('{"QMP": {"version": {}, "capabilities": []}}\n{"return": {}, "id": "svc-1"}\n')).listen(mute),
    createServer(() => { /* never greets: the client's deadline is what is tested */ }).listen(silent),
  ];
  try {
    await new Promise((r) => setTimeout(r, 50));
    const qmp = await QmpClient.connect(mute, { timeoutMs: 2_000 });
    const t0 = Date.now();
    await assert.rejects(qmp.execute('query-status', undefined, 300), /no answer within 300 ms/);
    assert.ok(Date.now() - t0 < 2_000);
    qmp.close();
    await assert.rejects(QmpClient.connect(silent, { timeoutMs: 300 }), /no greeting within 300 ms/);
  } finally {
    for (const s of servers) s.close();
    await rm(dir, { recursive: true, force: true });
  }
});
