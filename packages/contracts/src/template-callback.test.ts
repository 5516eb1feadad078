import assert from 'node:assert/strict';
import { test } from 'node:test';
import { verifyCallbackToken } from './template-callback.ts';

test('callback token: match, mismatch, missing, unset (fail closed) and the insecure opt-in', () => {
  assert.deepEqual(verifyCallbackToken('s3cret', 's3cret', false), { ok: true });
  assert.equal((verifyCallbackToken('wrong', 's3cret', false) as { status: number }).status, 401);
  assert.equal((verifyCallbackToken('s3cre', 's3cret', false) as { status: number }).status, 401);
  assert.equal((verifyCallbackToken(undefined, 's3cret', true) as { status: number }).status, 401);
  assert.equal((verifyCallbackToken('anything', '', false) as { status: number }).status, 503);
  assert.deepEqual(verifyCallbackToken(undefined, '', true), { ok: true });
});
