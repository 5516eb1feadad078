import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalAddress, clientPrefix } from './ip-address.ts';

test('canonicalAddress: every form of a mapped or loopback address is one', () => {
  for (const form of ['::ffff:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1', '0000:0000:0000:0000:0000:FFFF:7F00:0001']) {
    assert.equal(canonicalAddress(form), '127.0.0.1', form);
  }
  assert.equal(canonicalAddress('0:0:0:0:0:0:0:1'), '::1');
  assert.equal(canonicalAddress('0:0:0:0:0:ffff:a9fe:a9fe'), '169.254.169.254');
  assert.equal(canonicalAddress('2001:DB8:0:0::1'), '2001:db8::1');
  assert.equal(canonicalAddress('fe80::1%eth0'), 'fe80::1');
  assert.equal(canonicalAddress('10.0.0.1'), '10.0.0.1');
  assert.equal(canonicalAddress('registry.example.com'), 'registry.example.com');
  assert.equal(canonicalAddress('not:an:address'), 'not:an:address');
});

test('clientPrefix: IPv4 as itself, IPv6 as its /64 whatever its written form', () => {
  assert.equal(clientPrefix('203.0.113.7'), '203.0.113.7');
  assert.equal(clientPrefix('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(clientPrefix('::ffff:cb00:7107'), '203.0.113.7');
  const same = ['2001:0:0:5:1:2:3:4', '2001::5:1:2:3:4', '2001:0:0:5::1', '2001:0000:0:5:ffff::', '2001:0:0:5:1:2:3:4%eth0'].map(clientPrefix);
  assert.deepEqual(new Set(same), new Set(['2001:0:0:5::/64']));
  assert.notEqual(clientPrefix('2001:0:0:6::1'), same[0]);
  assert.equal(clientPrefix('::1'), '0:0:0:0::/64');
});
