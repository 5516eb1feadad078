import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kernelRandomBytes } from './kernel-random.ts';

test('kernelRandomBytes reads the asked number of bytes from the kernel, different each time', () => {
  const a = kernelRandomBytes(16);
  const b = kernelRandomBytes(16);
  assert.equal(a.length, 16);
  assert.notDeepEqual(a, b);
  assert.equal(kernelRandomBytes(0).length, 0);
  assert.equal(kernelRandomBytes(70_000).length, 70_000);
});
