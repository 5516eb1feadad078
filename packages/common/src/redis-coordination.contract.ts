/**
 * The behaviour every Coordination must have, as a test suite that the in-memory and the
 * Redis implementation both run (memory-coordination.test.ts, redis-coordination.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withLock, withLockWaiting, type Coordination } from './coordination.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ContractHooks {
  /** Two handles on the same store (two processes in the Redis case). */
  pair(): Promise<[Coordination, Coordination]>;
  /** Waits until subscriptions made so far are live. */
  settle(c: Coordination): Promise<void>;
}

export function coordinationContract(hooks: ContractHooks) {
  let n = 0;
  const name = (what: string) => `${what}-${process.pid}-${++n}`;

  test('a lease has one holder, renews for it, and expires', async () => {
    const [a, b] = await hooks.pair();
    const lease = name('lease');
    assert.equal(await a.acquireLease(lease, 'r1', 300), true);
    assert.equal(await b.acquireLease(lease, 'r2', 300), false);
    assert.equal(await b.leaseHolder(lease), 'r1');
    await sleep(200);
    assert.equal(await a.acquireLease(lease, 'r1', 300), true, 'the holder renews');
    await sleep(200);
    assert.equal(await b.acquireLease(lease, 'r2', 300), false, 'still held after renewal');
    await sleep(350);
    assert.equal(await b.leaseHolder(lease), null);
    assert.equal(await b.acquireLease(lease, 'r2', 300), true, 'taken over after expiry');
    await a.releaseLease(lease, 'r1');
    assert.equal(await a.leaseHolder(lease), 'r2', 'release by a non-holder is a no-op');
    await b.releaseLease(lease, 'r2');
    assert.equal(await a.leaseHolder(lease), null);
  });

  test('a lock is exclusive even for its own holder, and expires', async () => {
    const [a, b] = await hooks.pair();
    const lock = name('lock');
    assert.equal(await a.tryLock(lock, 'h1', 300), true);
    assert.equal(await a.tryLock(lock, 'h1', 300), false);
    assert.equal(await b.tryLock(lock, 'h2', 300), false);
    await b.unlock(lock, 'h2');
    assert.equal(await b.tryLock(lock, 'h2', 300), false, 'unlock by a non-holder is a no-op');
    await a.unlock(lock, 'h1');
    assert.equal(await b.tryLock(lock, 'h2', 150), true);
    await sleep(250);
    assert.equal(await a.tryLock(lock, 'h1', 300), true, 'an expired lock is free');
    await a.unlock(lock, 'h1');
  });

  test('withLock runs the function only when the lock is free', async () => {
    const [a, b] = await hooks.pair();
    const lock = name('with');
    let inner: unknown;
    const outer = await withLock(a, lock, 'h1', 1_000, async () => {
      inner = await withLock(b, lock, 'h2', 1_000, async () => 'ran');
      return 'outer';
    });
    assert.deepEqual(outer, { acquired: true, value: 'outer' });
    assert.deepEqual(inner, { acquired: false });
    assert.equal(await b.tryLock(lock, 'h2', 100), true, 'released afterwards');
  });

  test('a lock taken by withLock or withLockWaiting holds past its TTL while the function runs, and is released after', async () => {
    const [a, b] = await hooks.pair();
    for (const take of [
      (lock: string, fn: () => Promise<string>) => withLock(a, lock, 'proc-a', 600, fn),
      (lock: string, fn: () => Promise<string>) => withLockWaiting(a, lock, 'proc-a', { ttlMs: 600, waitMs: 0, busy: () => new Error('busy') }, fn),
    ]) {
      const lock = name('renewed');
      let during: unknown;
      await take(lock, async () => {
        await sleep(1_800);
        during = await withLock(b, lock, 'proc-b', 600, async () => 'ran');
        return 'done';
      });
      assert.deepEqual(during, { acquired: false }, 'three TTLs later the lock is still held: renewed');
      assert.equal(await b.tryLock(lock, 'proc-b', 100), true, 'released afterwards');
    }
  });

  test('one process\'s acquisitions are apart: its unlock of a lapsed one never drops its next', async () => {
    const [a] = await hooks.pair();
    const lock = name('apart');
    // The same process name for both, as one master's requests share it.
    const first = withLockWaiting(a, lock, 'master-1', { ttlMs: 5_000, waitMs: 0, busy: () => new Error('busy') }, async () => 'first');
    assert.equal(await first, 'first');
    const order: string[] = [];
    await withLockWaiting(a, lock, 'master-1', { ttlMs: 5_000, waitMs: 0, busy: () => new Error('busy') }, async () => {
      // A holder named as the process alone (the old way) cannot release this acquisition.
      await a.unlock(lock, 'master-1');
      order.push(String(await a.tryLock(lock, 'someone', 100)));
    });
    assert.deepEqual(order, ['false']);
  });

  test('lock and lease names over 63 characters are refused', async () => {
    const [a] = await hooks.pair();
    await assert.rejects(a.tryLock('x'.repeat(64), 'h', 100), /too long/);
    await assert.rejects(a.acquireLease('x'.repeat(64), 'h', 100), /too long/);
  });

  test('kv values are shared, expire with a ttl and can be deleted', async () => {
    const [a, b] = await hooks.pair();
    const k1 = name('kv');
    const k2 = name('kv');
    assert.equal(await b.kvGet(k1), null);
    await a.kvSet(k1, 'v1');
    await a.kvSet(k2, 'v2', 150);
    assert.equal(await b.kvGet(k1), 'v1');
    assert.equal(await b.kvGet(k2), 'v2');
    await sleep(250);
    assert.equal(await b.kvGet(k2), null);
    await b.kvSet(k1, 'v1b');
    assert.equal(await a.kvGet(k1), 'v1b');
    await a.kvDel(k1);
    assert.equal(await b.kvGet(k1), null);
  });

  test('events reach every subscriber of the topic, and a throwing handler harms no one', async () => {
    const [a, b] = await hooks.pair();
    const topic = name('topic');
    const gotA: unknown[] = [];
    const gotB: unknown[] = [];
    const unsubThrow = b.subscribe(topic, () => { throw new Error('handler bug'); });
    const unsubA = a.subscribe(topic, (e) => gotA.push(e));
    const unsubB = b.subscribe(topic, (e) => gotB.push(e));
    b.subscribe(name('other'), () => assert.fail('wrong topic'));
    await hooks.settle(a);
    await hooks.settle(b);
    await a.publish(topic, { kind: 'sandbox.created', sandboxId: 's1' });
    await waitFor(() => gotA.length === 1 && gotB.length === 1);
    assert.deepEqual(gotB[0], { kind: 'sandbox.created', sandboxId: 's1' });
    unsubB();
    unsubThrow();
    await a.publish(topic, { n: 2 });
    await waitFor(() => gotA.length === 2);
    await sleep(50);
    assert.equal(gotB.length, 1, 'unsubscribed handler gets nothing more');
    unsubA();
  });
}

async function waitFor(cond: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}
