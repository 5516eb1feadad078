import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { whenMissing } from './missing.ts';

test('whenMissing: ENOENT and ENOTDIR become the value; any other error is rethrown', async () => {
  assert.equal(await stat('/nonexistent/svc-missing-test').catch(whenMissing(undefined)), undefined);
  assert.equal(await stat('/etc/hostname/below-a-file').catch(whenMissing(null)), null);
  const denied = Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' });
  await assert.rejects(Promise.reject(denied).catch(whenMissing(undefined)), denied);
  await assert.rejects(Promise.reject(new Error('no code')).catch(whenMissing(undefined)), /no code/);
});
