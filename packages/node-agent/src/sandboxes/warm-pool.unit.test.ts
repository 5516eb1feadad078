import assert from 'node:assert/strict';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { Instance } from './instances.ts';
import { WarmPool, type WarmPoolDeps } from './warm-pool.ts';

const SHAPE = { cpuCount: 1, memoryMB: 512, diskSizeMB: 2048 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A pool whose "sandboxes" start in `startMs` and are plain objects. */
function pool(over: Partial<WarmPoolDeps> = {}, startMs = 20) {
  let n = 0;
  const started: string[] = [];
  const destroyed: string[] = [];
  let concurrent = 0;
  let maxConcurrent = 0;
  const p = new WarmPool({
    size: 2, max: 4, shape: SHAPE, logger: silentLogger(), retryMs: 50, shrinkAfterMs: 200,
    start: async (artifactId) => {
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      await sleep(startMs);
      concurrent--;
      const id = `w${++n}`;
      started.push(id);
      return { record: { artifactId, instanceId: id } } as unknown as Instance;
    },
    destroy: async (inst) => { destroyed.push(inst.record.instanceId); },
    ...over,
  });
  return { p, started, destroyed, maxConcurrent: () => maxConcurrent };
}

async function until(cond: () => boolean, ms = 3_000) {
  const end = Date.now() + ms;
  while (!cond()) { if (Date.now() > end) assert.fail('timed out'); await sleep(5); }
}

test('starts at size, two at a time, and counts hits and misses', async () => {
  const { p, maxConcurrent } = pool();
  p.fill('a');
  await until(() => p.count() === 2);
  assert.equal(maxConcurrent(), 2, 'started in parallel');
  assert.ok(await p.take('a', SHAPE));
  assert.equal(await p.take('a', { ...SHAPE, memoryMB: 1024 }), undefined, 'another shape starts cold, and is no miss');
  assert.deepEqual({ hits: p.stats().hits, misses: p.stats().misses }, { hits: 1, misses: 0 });
  await until(() => p.count() === 2);
  await p.close();
});

test('grows by one for each create that finds it empty, up to max, and shrinks back when idle', async () => {
  const { p, destroyed } = pool({}, 100);
  p.fill('a');
  await until(() => p.count() === 2);
  await p.take('a', SHAPE);
  await p.take('a', SHAPE);
  // Each finds the pool empty: it grows, and the first two are handed the starts under way.
  const found = await Promise.all(Array.from({ length: 5 }, () => p.take('a', SHAPE)));
  assert.equal(found.filter(Boolean).length, 2, 'two creates got the two starts under way; three start cold');
  assert.equal(p.stats().artifacts.a.target, 4, 'bounded by max');
  assert.equal(p.stats().misses, 5);
  await until(() => p.count() === 4);
  // No hand-out for a while: one back per period, down to size, extra sandboxes destroyed.
  await until(() => p.stats().artifacts.a.target === 2, 3_000);
  assert.equal(p.count(), 2);
  assert.equal(destroyed.length, 2);
  await p.close();
});

test('starts nothing while the node has no memory for it, and resumes when it has', async () => {
  let room = false;
  const { p, started } = pool({ hasRoom: () => room });
  p.fill('a');
  await sleep(100);
  assert.equal(started.length, 0);
  room = true;
  p.fill('a');
  await until(() => p.count() === 2);
  await p.close();
});

test('a failed start is retried later; close and drain destroy what is ready', async () => {
  let fail = true;
  const { p, destroyed } = pool({
    start: async (artifactId) => {
      if (fail) throw new Error('boom');
      return { record: { artifactId, instanceId: `ok-${Math.random()}` } } as unknown as Instance;
    },
  });
  p.fill('a');
  await sleep(20);
  assert.equal(p.count(), 0);
  fail = false;
  await until(() => p.count() === 2);
  p.fill('b');
  await until(() => p.count() === 4);
  await p.drain('a');
  assert.equal(p.count(), 2);
  await p.close();
  assert.equal(destroyed.length, 4);
  assert.equal(await p.take('b', SHAPE), undefined, 'a closed pool hands nothing out');
});

test('a hand-out refills after refillDelayMs; a create that finds the pool empty waits for a start under way, not longer than maxWaitMs', async () => {
  const { p, started } = pool({ refillDelayMs: 150, maxWaitMs: 400 }, 100);
  p.fill('a');
  await until(() => p.count() === 2);
  await p.take('a', SHAPE);
  await sleep(60);
  assert.equal(started.length, 2, 'no refill yet: the new sandbox\'s first commands go first');
  await until(() => started.length === 3);
  await p.take('a', SHAPE);
  await until(() => p.count() === 2);
  // Empty, with no start under way: a create starts cold (a start it set off would be no sooner).
  await p.take('a', SHAPE);
  await p.take('a', SHAPE);
  assert.equal(await p.take('a', SHAPE), undefined);
  // That miss set the refill off: the next create waits for one of its starts, and gets it.
  const t0 = Date.now();
  const got = await p.take('a', SHAPE);
  assert.ok(got, 'handed the warm sandbox that was starting');
  assert.ok(Date.now() - t0 < 350, 'sooner than a cold start of its own');
  await p.close();

  const slow = pool({ maxWaitMs: 100 }, 1_000);
  slow.p.fill('b');
  await sleep(10);
  const t1 = Date.now();
  assert.equal(await slow.p.take('b', SHAPE), undefined, 'gives up waiting: starts cold');
  assert.ok(Date.now() - t1 < 500);
  await slow.p.close();
});

test('waiting creates are sent away when a start fails or the pool closes', async () => {
  const { p } = pool({ start: async () => { await sleep(50); throw new Error('boom'); } });
  p.fill('a');
  await sleep(10);
  const t0 = Date.now();
  assert.equal(await p.take('a', SHAPE), undefined, 'the start it waited for failed: cold');
  assert.ok(Date.now() - t0 < 200, 'sent away when the start failed, not after maxWaitMs');
  const { p: q } = pool({}, 5_000);
  q.fill('b');
  await sleep(10);
  const waiting = q.take('b', SHAPE);
  await sleep(20);
  const closing = q.close();
  assert.equal(await waiting, undefined);
  await closing;
  await p.close();
});

test('starts at initial, within size and max, and shrinks from there to size when idle', async () => {
  const { p, destroyed } = pool({ initial: 3 });
  p.fill('a');
  await until(() => p.count() === 3);
  assert.equal(p.stats().artifacts.a.target, 3);
  await until(() => destroyed.length === 1, 2_000);
  assert.equal(p.stats().artifacts.a.target, 2, 'back to size after shrinkAfterMs without a hand-out');
  await p.close();

  const capped = pool({ initial: 10 });
  capped.p.fill('b');
  await until(() => capped.p.count() === 4);
  assert.equal(capped.p.stats().artifacts.b.target, 4, 'never past max');
  await capped.p.close();
});

test('a burst of hand-outs defers the refill until they pause', async () => {
  const { p, started } = pool({ initial: 4, refillDelayMs: 150 });
  p.fill('a');
  await until(() => p.count() === 4);
  for (let i = 0; i < 3; i++) {
    assert.ok(await p.take('a', SHAPE));
    await sleep(80);
  }
  assert.equal(started.length, 4, 'nothing started while creates kept coming');
  await until(() => p.count() === 4);
  assert.equal(started.length, 7);
  await p.close();
});

test('a node that comes up with many templates starts at most nodeConcurrency of their sandboxes at once', async () => {
  const { p, maxConcurrent } = pool({ nodeConcurrency: 3 });
  for (const t of ['a', 'b', 'c', 'd', 'e']) p.fill(t);
  await until(() => p.count() === 10);
  assert.equal(maxConcurrent(), 3, 'five templates of two each, never more than three boots at once');
  // Closing while starts wait for a slot starts none of them.
  const q = pool({ nodeConcurrency: 1 }, 200);
  for (const t of ['a', 'b', 'c']) q.p.fill(t);
  await sleep(50);
  await q.p.close();
  await sleep(250);
  assert.equal(q.started.length, 1, 'only the start under way at the close ran');
  await p.close();
});
