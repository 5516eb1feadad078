import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileSignature, type SignedFileRequest } from '@svc/common/envd-signature';
import { SignerLookup } from './signer-lookup.ts';

const signedBy = (token: string, path = '/home/user/a.txt'): SignedFileRequest => ({ path, operation: 'read', username: 'user', signature: fileSignature(path, 'read', 'user', token) });

test('a flood of made-up signatures reads the tokens about ten times a second, not once per look-up', async () => {
  let reads = 0;
  const lookup = new SignerLookup(async () => { reads++; return [{ sandboxId: 'a', token: 'token-a' }]; });
  const started = Date.now();
  for (let i = 0; i < 300; i++) assert.equal(await lookup.signerOf(signedBy(`made-up-${i}`)), undefined);
  const elapsedS = (Date.now() - started) / 1000;
  assert.ok(reads <= 2 + elapsedS * 12, `${reads} reads in ${elapsedS.toFixed(2)} s`);
  assert.equal(await lookup.signerOf(signedBy('token-a')), 'a');
});

test('a sandbox made since the last read is found: a miss reads again when the list is over 100 ms old; reads under way are shared', async () => {
  const tokens = [{ sandboxId: 'a', token: 'token-a' }];
  let reads = 0;
  const lookup = new SignerLookup(async () => { reads++; await new Promise((r) => setTimeout(r, 20)); return [...tokens]; });
  await Promise.all([1, 2, 3, 4].map(() => lookup.signerOf(signedBy('token-a'))));
  assert.equal(reads, 1, 'four look-ups at once share one read');
  tokens.push({ sandboxId: 'b', token: 'token-b' });
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(await lookup.signerOf(signedBy('token-b')), 'b');
  assert.equal(reads, 2);
});
