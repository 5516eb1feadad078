import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingBytes } from './pending-bytes.ts';

test('reservations add up, written gives back its part and release the rest once', () => {
  const p = new PendingBytes();
  const a = p.reserve(100);
  const b = p.reserve(50);
  assert.equal(p.bytes, 150);
  a.written(30);
  a.written(-5); // a negative count gives nothing back
  assert.equal(p.bytes, 120);
  a.written(500); // never more than was promised
  assert.equal(p.bytes, 50);
  a.release();
  b.release();
  b.release();
  assert.equal(p.bytes, 0);
});
