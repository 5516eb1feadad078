/**
 * The subnets attached to the host through interfaces other than the default route's
 * (attached-networks.ts), and the guard refusing them when egress.refuse_attached_networks is on.
 */
import assert from 'node:assert/strict';
import type { NetworkInterfaceInfo } from 'node:os';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import { attachedNetworks, defaultRouteInterfaces } from './attached-networks.ts';
import { outsidePools, PlatformGuard } from './platform-guard.ts';

const ROUTES = [
  'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT',
  'eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0',
  'eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0',
  'docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0',
].join('\n');
const v4 = (address: string, netmask: string, cidr: string, internal = false): NetworkInterfaceInfo =>
  ({ address, netmask, cidr, family: 'IPv4', internal, mac: '00:00:00:00:00:00' });
const INTERFACES = {
  lo: [v4('127.0.0.1', '255.0.0.0', '127.0.0.1/8', true)],
  eth0: [v4('192.0.2.2', '255.255.255.0', '192.0.2.2/24')],
  docker0: [v4('172.17.0.1', '255.255.0.0', '172.17.0.1/16')],
  virbr0: [v4('192.168.122.1', '255.255.255.0', '192.168.122.1/24'), { address: 'fe80::1', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6', internal: false, mac: '', cidr: 'fe80::1/64', scopeid: 1 } as NetworkInterfaceInfo],
};

test('the default route\'s interface is left out, loopback and IPv6 too; without a route table every interface counts', () => {
  assert.deepEqual(defaultRouteInterfaces(ROUTES), new Set(['eth0']));
  assert.deepEqual(attachedNetworks(INTERFACES, new Set(['eth0'])).map((a) => `${a.iface} ${a.cidr}`), ['docker0 172.17.0.1/16', 'virbr0 192.168.122.1/24']);
  assert.deepEqual(attachedNetworks(INTERFACES, undefined).map((a) => a.iface), ['eth0', 'docker0', 'virbr0']);
});

test('with refuseAttachedNetworks the guard refuses a container bridge\'s or a VM network\'s addresses on any port; without it, not', () => {
  const read = () => attachedNetworks(INTERFACES, new Set(['eth0']));
  const on = new PlatformGuard({ sandboxPool: '10.250.0.0/16', refuseAttachedNetworks: true }, undefined, silentLogger(), read);
  assert.equal(on.refusal('172.17.0.5', 5432), 'is on a network attached to the host through docker0 (172.17.0.1/16), not its default route (egress.refuse_attached_networks)');
  assert.match(on.refusal('192.168.122.40', 22) ?? '', /through virbr0 \(192\.168\.122\.1\/24\)/);
  assert.equal(on.refusal('192.0.2.77', 443), undefined, 'the default route\'s own network is the way out');
  assert.equal(on.refusal('172.18.0.5', 443), undefined);
  const off = new PlatformGuard({ sandboxPool: '10.250.0.0/16' }, undefined, silentLogger(), read);
  assert.equal(off.refusal('172.17.0.5', 5432), undefined);
});

test('the sandboxes\' veth subnets (inside a pool) are left out of the attached list, and a subnet seen twice is kept once', async () => {
  // Each sandbox's veth puts a subnet of the pool on the host: unfiltered, every allowed request
  // scanned one entry per sandbox on the node.
  const veths: NodeJS.Dict<NetworkInterfaceInfo[]> = {};
  for (let i = 0; i < 500; i++) veths[`veth${i}`] = [v4(`10.250.${i >> 6}.${(i & 63) * 4 + 1}`, '255.255.255.252', `10.250.${i >> 6}.${(i & 63) * 4 + 1}/30`)];
  // A second node's pool, from the master's list.
  veths.vethx = [v4('10.251.0.1', '255.255.255.252', '10.251.0.1/30')];
  const interfaces = { ...INTERFACES, ...veths, docker1: [v4('172.17.0.2', '255.255.0.0', '172.17.0.2/16')] };
  const read = () => attachedNetworks(interfaces, new Set(['eth0']));
  const pool = { base: (10 << 24 | 250 << 16) >>> 0, mask: 0xffff0000 };
  assert.deepEqual(outsidePools(read(), [pool]).map((a) => a.cidr), ['172.17.0.1/16', '192.168.122.1/24', '10.251.0.1/30']);
  // The pool's own network goes (the pool check refuses all of it); a wider one holding it stays.
  const wide = attachedNetworks({ br: [v4('10.0.0.1', '255.0.0.0', '10.0.0.1/8')], same: [v4('10.250.0.1', '255.255.0.0', '10.250.0.1/16')] }, new Set());
  assert.deepEqual(outsidePools(wide, [pool]).map((a) => a.iface), ['br']);

  const guard = new PlatformGuard({ sandboxPool: '10.250.0.0/16', refuseAttachedNetworks: true }, async () => ({ endpoints: [], pools: ['10.251.0.0/16'] }), silentLogger(), read);
  await guard.refresh();
  assert.equal((guard as unknown as { attached: unknown[] }).attached.length, 2, 'docker0 and virbr0 only');
  assert.equal(guard.refusal('10.250.3.9', 443), 'is in the sandbox address pool');
  assert.equal(guard.refusal('10.251.0.2', 443), 'is in the sandbox address pool');
  assert.match(guard.refusal('172.17.0.5', 5432) ?? '', /through docker0/);
  assert.match(guard.refusal('192.168.122.40', 22) ?? '', /through virbr0/);
});
