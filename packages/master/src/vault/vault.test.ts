import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newVaultKeyFile, Vault } from './vault.ts';

test('a seal opens with its full 16-byte tag only: a tag cut to 4 or 12 bytes is refused', () => {
  // GCM checks a short tag against the full one's first bytes; until 2026-12-01 the decipher took
  // any length, so a forger needed 2^32 guesses of a 4-byte tag, not 2^128.
  const vault = new Vault(newVaultKeyFile('k1'));
  const sealed = vault.seal('hunter2', 'ctx');
  assert.equal(vault.open(sealed, 'ctx'), 'hunter2');
  const [format, keyId, iv, tag, ct] = sealed.split(':');
  for (const bytes of [4, 8, 12]) {
    const short = [format, keyId, iv, Buffer.from(tag!, 'base64').subarray(0, bytes).toString('base64'), ct].join(':');
    assert.throws(() => vault.open(short, 'ctx'), new RegExp(`integrity check \\(its tag is ${bytes} bytes, not 16\\)`), `${bytes} bytes`);
  }
});

test('isStale: a seal under another key than the primary', () => {
  const k1 = newVaultKeyFile('k1');
  const old = new Vault(k1);
  const rotated = new Vault({ primary: 'k2', keys: { ...k1.keys, ...newVaultKeyFile('k2').keys } });
  assert.equal(rotated.isStale(old.seal('x', 'c')), true);
  assert.equal(rotated.isStale(rotated.seal('x', 'c')), false);
});
