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
