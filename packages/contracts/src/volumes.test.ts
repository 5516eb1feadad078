/** The volume name check the master applies to a create (checkVolumeName). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkVolumeName } from './volumes.ts';

const refusal = (name: unknown) => {
  try {
    checkVolumeName(name);
  } catch (err) {
    return { status: (err as { status?: number }).status, message: (err as Error).message };
  }
  return undefined;
};

test('a name that begins with \'-\' is a 400 naming the rule: a binary plugin is told it as --name NAME', () => {
  for (const name of ['-h', '--op', '-', '--help']) {
    assert.deepEqual(refusal(name), { status: 400, message: 'name must not begin with \'-\' (a volume plugin would read it as a flag)' }, name);
  }
  for (const name of ['a-', 'a--b', '_-x', 'work']) assert.equal(refusal(name), undefined, name);
});

test('the other rules stay: non-empty, at most 128 characters, [a-zA-Z0-9_-]', () => {
  assert.equal(refusal('')?.status, 400);
  assert.equal(refusal('a b')?.status, 400);
  assert.equal(refusal('x'.repeat(129))?.status, 400);
  assert.equal(refusal(7)?.status, 400);
  assert.equal(refusal('x'.repeat(128)), undefined);
});
