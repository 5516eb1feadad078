import { test } from 'node:test';
import assert from 'node:assert/strict';
import { embeddedIpv4, inIpCidr, parseIpCidr } from './ip-cidr.ts';

test('parseIpCidr and inIpCidr: IPv4 and IPv6 networks, bare addresses, mapped forms', () => {
  const v4 = parseIpCidr('10.1.2.3/16');
  assert.equal(inIpCidr('10.1.200.9', v4), true);
  assert.equal(inIpCidr('::ffff:10.1.0.1', v4), true, 'an IPv4-mapped address is its IPv4 address');
  assert.equal(inIpCidr('10.2.0.1', v4), false);
  assert.equal(inIpCidr('2001:db8::1', v4), false, 'another family');
  const v6 = parseIpCidr('2001:DB8:0:5::/64');
  assert.equal(inIpCidr('2001:db8:0:5:ffff::1', v6), true);
  assert.equal(inIpCidr('2001:db8:0:6::1', v6), false);
  assert.equal(inIpCidr('fe80::1%eth0', parseIpCidr('fe80::/10')), true, 'a zone id is dropped');
  assert.equal(inIpCidr('203.0.113.7', parseIpCidr('203.0.113.7')), true, 'a bare address is a /32');
  assert.equal(inIpCidr('203.0.113.8', parseIpCidr('203.0.113.7')), false);
  assert.equal(inIpCidr('::1', parseIpCidr('::1')), true);
  assert.equal(inIpCidr('10.9.0.1', parseIpCidr('::ffff:10.9.0.0/112')), true, 'a mapped network is the IPv4 one');
  assert.equal(inIpCidr('8.8.8.8', parseIpCidr('0.0.0.0/0')), true);
  for (const bad of ['10.0.0.0/33', '10.0.0/8', 'example.com', '2001:db8::/129', '10.0.0.0/8/1', '10.0.0.0/x', '']) {
    assert.throws(() => parseIpCidr(bad), /not an IP address or CIDR|bad prefix length/, bad);
  }
});

test('embeddedIpv4: the IPv4 address NAT64, 6to4 and compatible forms reach', () => {
  assert.equal(embeddedIpv4('64:ff9b::a9fe:a9fe'), '169.254.169.254');
  assert.equal(embeddedIpv4('64:ff9b::169.254.169.254'), '169.254.169.254');
  assert.equal(embeddedIpv4('64:ff9b:1::a00:5'), '10.0.0.5');
  assert.equal(embeddedIpv4('2002:a9fe:a9fe::1'), '169.254.169.254');
  assert.equal(embeddedIpv4('::7f00:1'), '127.0.0.1');
  assert.equal(embeddedIpv4('::ffff:0:a00:1'), '10.0.0.1');
  for (const none of ['::1', '::', '2001:db8::1', 'fd00:ec2::254', '10.0.0.1', 'example.com']) assert.equal(embeddedIpv4(none), undefined, none);
});
