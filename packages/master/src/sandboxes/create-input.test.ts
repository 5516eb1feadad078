import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkCreateInput, parseNetworkUpdate } from './create-input.ts';

test('allowOut naming link-local (cloud metadata) is a 400 on create and on updateNetwork; a wider range, denyOut and other addresses are not', () => {
  const create = (allowOut: string[]) => checkCreateInput({ template: 'base', network: { allowOut } });
  for (const entry of ['169.254.169.254', '169.254.169.254/32', '169.254.0.0/16', ' 169.254.1.2/24']) {
    for (const attempt of [() => create([entry]), () => parseNetworkUpdate({ allowOut: ['1.2.3.4', entry] })]) {
      assert.throws(attempt, (e: { status?: number; message: string }) => e.status === 400 && e.message.startsWith(`network.allowOut: ${entry} is link-local`), entry);
    }
  }
  assert.deepEqual(create(['0.0.0.0/0', '169.0.0.0/8', '10.0.0.1', 'api.example.com']).network.allowOut, ['0.0.0.0/0', '169.0.0.0/8', '10.0.0.1', 'api.example.com']);
  assert.deepEqual(parseNetworkUpdate({ denyOut: ['169.254.169.254/32'] }).denyOut, ['169.254.169.254/32']);
});
