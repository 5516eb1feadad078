import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withLockWaiting } from './coordination.ts';
import { MemoryCoordination } from './memory-coordination.ts';

test('a lock whose renewals did not land within its TTL is not held still, even where the store would give it back', async () => {
  let down = false;
  class Flaky extends MemoryCoordination {
    override async acquireLease(name: string, holder: string, ttlMs: number) {
      if (down) throw new Error('store unreachable');
      return super.acquireLease(name, holder, ttlMs);
    }
  }
  const store = new Flaky();
  const busy = () => new Error('busy');
  const held = await withLockWaiting(store, 'lapsing', 'h', { ttlMs: 100, waitMs: 0, busy }, async (lock) => {
    assert.equal(await lock.stillHeld(), true);
    down = true;
    await new Promise((r) => setTimeout(r, 250)); // renewals fail past the TTL: another holder could have come and gone
    down = false;
    return lock.stillHeld();
  });
  assert.equal(held, false);
  // Released all the same: the next holder takes it at once.
  assert.equal(await withLockWaiting(store, 'lapsing', 'h2', { ttlMs: 100, waitMs: 0, busy }, async () => 'next'), 'next');
});
