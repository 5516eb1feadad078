import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Slots } from './slots.ts';

test('at most size holders; the waiting ones are served in order; a release counts once', async () => {
  const slots = new Slots(2);
  const never = new AbortController().signal;
  const a = await slots.acquire(never);
  const b = slots.tryAcquire();
  assert.ok(b, 'a second slot is free at once');
  assert.equal(slots.tryAcquire(), undefined, 'no third');
  const order: string[] = [];
  const c = slots.acquire(never).then((r) => { order.push('c'); return r; });
  const d = slots.acquire(never).then((r) => { order.push('d'); return r; });
  a();
  a(); // twice: still one slot freed
  const releaseC = await c;
  assert.deepEqual(order, ['c']);
  assert.equal(slots.tryAcquire(), undefined, 'd waits, so nobody jumps the queue');
  b!();
  (await d)();
  releaseC();
  assert.ok(slots.tryAcquire(), 'all free again');
});

test('a wait ends with its signal, and takes no slot', async () => {
  const slots = new Slots(1);
  const held = slots.tryAcquire()!;
  const ac = new AbortController();
  const waiting = slots.acquire(ac.signal);
  ac.abort(new Error('closing'));
  await assert.rejects(waiting, /closing/);
  held();
  assert.ok(slots.tryAcquire(), 'the aborted wait did not keep the freed slot');
  await assert.rejects(slots.acquire(AbortSignal.abort(new Error('already'))), /already/);
});

/** Waits on `slots` under `key`, noting `name` in `order` once it holds a slot. */
function waiter(slots: Slots, order: string[], name: string, key?: string, signal = new AbortController().signal) {
  return slots.acquire(signal, key).then((release) => { order.push(name); return release; });
}

test('keys take turns: a lone waiter of one key gets the second freed slot, not the sixth', async () => {
  const slots = new Slots(1);
  const order: string[] = [];
  let held = slots.tryAcquire()!;
  const many = [1, 2, 3, 4, 5].map((i) => waiter(slots, order, `a${i}`, 'team-a'));
  const lone = waiter(slots, order, 'b1', 'team-b');
  assert.equal(slots.waitingAhead('team-b'), 3, 'a new waiter of team-b: a1, b1, then a2 go first');
  assert.equal(slots.waitingAhead('team-c'), 2, 'a new key: one turn of each key first');
  assert.equal(slots.waitingAhead('team-a'), 6, 'another of team-a: after its five, and b1');
  for (const next of [...many.slice(0, 1), lone, ...many.slice(1)]) {
    held();
    held = await next;
  }
  assert.deepEqual(order, ['a1', 'b1', 'a2', 'a3', 'a4', 'a5']);
  held();
  assert.equal(slots.held, 0);
  assert.ok(slots.tryAcquire(), 'all free again: no key left behind');
});

test('a key that comes later joins the rotation at its back; within a key, arrival order', async () => {
  const slots = new Slots(1);
  const order: string[] = [];
  let held = slots.tryAcquire()!;
  const a1 = waiter(slots, order, 'a1', 'a');
  const a2 = waiter(slots, order, 'a2', 'a');
  const b1 = waiter(slots, order, 'b1', 'b');
  held();
  held = await a1;
  // a was served and waits still: it went behind b. c comes now, behind both.
  const c1 = waiter(slots, order, 'c1', 'c');
  for (const next of [b1, a2, c1]) {
    held();
    held = await next;
  }
  held();
  assert.deepEqual(order, ['a1', 'b1', 'a2', 'c1']);
});

test('an aborted waiter leaves its key\'s queue and, when it was the last, the rotation', async () => {
  const slots = new Slots(1);
  const order: string[] = [];
  let held = slots.tryAcquire()!;
  const gone = new AbortController();
  const b1 = waiter(slots, order, 'b1', 'b', gone.signal);
  const a1 = waiter(slots, order, 'a1', 'a');
  const a2 = waiter(slots, order, 'a2', 'a');
  gone.abort(new Error('template deleted'));
  await assert.rejects(b1, /template deleted/);
  // Had b kept its place at the head of the rotation, b2 would be served first.
  assert.equal(slots.waitingAhead('b'), 1, 'b joins again at the back: after a\'s next turn');
  const b2 = waiter(slots, order, 'b2', 'b');
  for (const next of [a1, b2, a2]) {
    held();
    held = await next;
  }
  held();
  assert.deepEqual(order, ['a1', 'b2', 'a2']);
  assert.equal(slots.held, 0, 'the aborted waiter took no slot');
  assert.ok(slots.tryAcquire());
});

test('waiters without a key share one queue, in arrival order, beside the keyed ones', async () => {
  const slots = new Slots(1);
  const order: string[] = [];
  let held = slots.tryAcquire()!;
  const s1 = waiter(slots, order, 's1');
  const s2 = waiter(slots, order, 's2');
  const k1 = waiter(slots, order, 'k1', 'team');
  assert.equal(slots.waitingAhead(), 3, 'the shared key: its two, then the team\'s turn before its third');
  for (const next of [s1, k1, s2]) {
    held();
    held = await next;
  }
  held();
  assert.deepEqual(order, ['s1', 'k1', 's2']);
});
