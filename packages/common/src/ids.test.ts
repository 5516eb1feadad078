/**
 * The sandbox ids the platform issues and the check that knows them (ids.ts): the data-plane proxy
 * refuses a Host naming an issued id other than the E2b-Sandbox-Id header's, so the check must
 * accept every id newSandboxId makes and nothing a proxy's own name could read as.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIssuedSandboxId, newSandboxId } from './ids.ts';

test('isIssuedSandboxId accepts every id newSandboxId issues', () => {
  for (let i = 0; i < 1000; i++) {
    const id = newSandboxId();
    assert.ok(isIssuedSandboxId(id), id);
  }
});

test('isIssuedSandboxId refuses any other form', () => {
  const id = 'iabcdefghij012345678';
  assert.ok(isIssuedSandboxId(id));
  const others = [
    '', 'i', id.slice(0, 19), `${id}0`, // wrong length
    id.toUpperCase(), `iabcdefghiJ012345678`, // upper case
    `x${id.slice(1)}`, `I${id.slice(1)}`, `0${id.slice(1)}`, // another first letter
    `i${'-'.repeat(19)}`, `iabcdefghij01234567_`, `iabcdefghij0123.5678`, `iabcdefghij01234567é`, // other characters
    '168-1-10', 'sbxa',
  ];
  for (const other of others) assert.equal(isIssuedSandboxId(other), false, other);
});
