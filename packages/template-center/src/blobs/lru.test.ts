import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pickEvictions } from './lru.ts';

const blob = (digest: string, sizeBytes: number, usedAtMs: number) => ({ digest, sizeBytes, usedAtMs });

test('least recently used go first, only until the rest fits', () => {
  const blobs = [blob('a', 40, 3), blob('b', 40, 1), blob('c', 40, 2)];
  assert.deepEqual(pickEvictions(blobs, 100, () => false).map((b) => b.digest), ['b']);
  assert.deepEqual(pickEvictions(blobs, 40, () => false).map((b) => b.digest), ['b', 'c']);
  assert.deepEqual(pickEvictions(blobs, 120, () => false), []);
  assert.deepEqual(pickEvictions(blobs, 0, () => false).map((b) => b.digest), ['b', 'c', 'a']);
});

test('pinned blobs stay even when the cache is over its limit', () => {
  const blobs = [blob('a', 40, 3), blob('b', 40, 1), blob('c', 40, 2)];
  assert.deepEqual(pickEvictions(blobs, 40, (d) => d === 'b').map((b) => b.digest), ['c', 'a']);
  assert.deepEqual(pickEvictions(blobs, 0, (d) => d !== 'c').map((b) => b.digest), ['c']);
});
