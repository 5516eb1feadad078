import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { getPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { renderMetrics } from './metrics.ts';
import { silentLogger } from './log.ts';
import { WorkerPool, type WorkerEntry } from './worker-pool.ts';

const entry: WorkerEntry = { exec: fileURLToPath(new URL('./testing/counter-worker.ts', import.meta.url)), args: [], execArgv: ['--import', 'tsx'] };

async function get(port: number): Promise<{ value: number; pid: number }> {
  // A new connection each time: the kernel spreads them over the workers.
  const r = await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } });
  return await r.json() as { value: number; pid: number };
}

test('a worker pool shares one listener, applies a change on every worker before it resolves, and replaces a dead worker from the current state', async () => {
  let value = 1;
  const events: unknown[] = [];
  const pool = await WorkerPool.start({ role: 'counter', count: 2, entry, init: () => ({ value, port: 0 }), logger: silentLogger(), onEvent: (b) => events.push(b) });
  try {
    const { port } = pool.info as { port: number };
    assert.equal(pool.size, 2);
    assert.equal(events.length, 2, 'each worker\'s event reached the primary');
    value = 2;
    await pool.broadcast({ set: 2 });
    const answers = await pool.request({});
    assert.deepEqual(answers.map((a) => (a as { value: number }).value), [2, 2], 'every worker holds the change once broadcast resolved');
    const seen = new Set<number>();
    for (let i = 0; i < 60 && seen.size < 2; i++) {
      const r = await get(port);
      assert.equal(r.value, 2);
      seen.add(r.pid);
    }
    // Kill one: the other keeps the listener; the replacement starts from init(), which holds 3.
    value = 3;
    await pool.broadcast({ set: 3 });
    const [victim] = pool.pids();
    process.kill(victim!, 'SIGKILL');
    for (let i = 0; i < 30; i++) assert.equal((await get(port)).value, 3, 'the listener stayed up');
    for (let i = 0; i < 100 && (pool.size < 2 || pool.pids().includes(victim!)); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(pool.size, 2);
    assert.ok(!pool.pids().includes(victim!));
    assert.deepEqual((await pool.request({})).map((a) => (a as { value: number }).value), [3, 3]);
    // The workers' metrics are summed into this process's; the pool's own say how many are ready and how many were replaced.
    const { body } = await renderMetrics();
    assert.match(body, /process_cpu_user_seconds_total/);
    assert.match(body, /^svc_workers\{role="counter"\} 2$/m);
    assert.match(body, /^svc_worker_restarts_total\{role="counter"\} 1$/m);
  } finally {
    await pool.close();
  }
});

test('workers run at the priority asked for (root), a replacement too', { skip: process.getuid?.() !== 0 && 'lowering a nice value needs root' }, async () => {
  const pool = await WorkerPool.start({ role: 'counter', count: 1, entry, init: () => ({ value: 1, port: 0 }), logger: silentLogger(), priority: -3, callTimeoutMs: 300 });
  try {
    const [first] = pool.pids();
    assert.equal(getPriority(first!), -3);
    await pool.broadcast({ slow: 5_000, set: 2 });
    for (let i = 0; i < 100 && (pool.size < 1 || pool.pids().includes(first!)); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(getPriority(pool.pids()[0]!), -3);
  } finally {
    await pool.close();
  }
});

test('a worker that does not acknowledge in time is replaced, and the call resolves', async () => {
  const pool = await WorkerPool.start({ role: 'counter', count: 1, entry, init: () => ({ value: 7, port: 0 }), logger: silentLogger(), callTimeoutMs: 300 });
  try {
    const [before] = pool.pids();
    await pool.broadcast({ slow: 5_000, set: 8 });
    for (let i = 0; i < 100 && (pool.size < 1 || pool.pids().includes(before!)); i++) await new Promise((r) => setTimeout(r, 100));
    assert.notEqual(pool.pids()[0], before);
    assert.deepEqual((await pool.request({})).map((a) => (a as { value: number }).value), [7]);
  } finally {
    await pool.close();
  }
});

test('a pool whose workers cannot start fails its start with the reason', async () => {
  await assert.rejects(
    WorkerPool.start({ role: 'counter', count: 2, entry, init: () => ({ value: 0, port: 0, failStart: true }), logger: silentLogger() }),
    /counter worker failed to start: told to fail/,
  );
});

test('with one worker, the port stays open while it is replaced: a connection made meanwhile waits and is served by the replacement', async () => {
  const pool = await WorkerPool.start({ role: 'counter', count: 1, entry, init: () => ({ value: 5, port: 0 }), logger: silentLogger() });
  try {
    const { port } = pool.info as { port: number };
    const [victim] = pool.pids();
    assert.equal((await get(port)).pid, victim);
    process.kill(victim!, 'SIGKILL');
    for (let i = 0; i < 100 && pool.pids().includes(victim!); i++) await new Promise((r) => setTimeout(r, 10));
    // Asked while the replacement still loads (about half a second): not refused, answered once it listens.
    const answer = await get(port);
    assert.equal(answer.value, 5);
    assert.notEqual(answer.pid, victim);
  } finally {
    await pool.close();
  }
  await assert.rejects(fetch(`http://127.0.0.1:${(pool.info as { port: number }).port}/`), 'the port is closed with the pool');
});

test('a listener that cannot be bound fails the start with the bind\'s error', async () => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
  const { port } = taken.address() as net.AddressInfo;
  try {
    await assert.rejects(
      WorkerPool.start({ role: 'counter', count: 1, entry, init: () => ({ value: 0, port }), logger: silentLogger() }),
      /counter worker failed to start: listen EADDRINUSE: 127\.0\.0\.1:\d+/,
    );
  } finally {
    taken.close();
  }
});

test('variables in env reach each worker\'s environment beside the primary\'s', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  const pool = await WorkerPool.start({ role: 'counter', count: 1, entry, init: () => ({ value: 1, port: 0 }), logger: silentLogger(), env: { UV_THREADPOOL_SIZE: '32' } });
  try {
    const environ = readFileSync(`/proc/${pool.pids()[0]}/environ`, 'utf8').split('\0');
    assert.ok(environ.includes('UV_THREADPOOL_SIZE=32'));
    assert.ok(environ.includes('SVC_WORKER_ROLE=counter'));
  } finally {
    await pool.close();
  }
});
