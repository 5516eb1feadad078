import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SvcError } from '@svc/common';
import { AddressPool, parseCidr, intToIp } from './network/address-pool.ts';
import type { HostNetwork } from './network/host-conflicts.ts';
import { normalizePolicy, onlyWidens, type EgressPolicy } from './network/egress-policy.ts';
import { checkResumeAdmission, usedMemoryMB } from './sandboxes/admission.ts';
import { ResourceNames } from './names.ts';
import { parseCreate } from './validate.ts';

describe('address pool', () => {
  it('hands out /30s: host .1, sandbox .2, a released slot only after a round of the pool', () => {
    const pool = new AddressPool('10.201.7.0/29');
    const a = pool.allocate();
    const b = pool.allocate();
    assert.deepEqual(a, { slot: 0, hostAddress: '10.201.7.1', sandboxAddress: '10.201.7.2' });
    assert.deepEqual(b, { slot: 1, hostAddress: '10.201.7.5', sandboxAddress: '10.201.7.6' });
    assert.throws(() => pool.allocate(), (e: SvcError) => e.status === 503 && /exhausted/.test(e.message));
    pool.release(0);
    assert.equal(pool.allocate().slot, 0);
    const wide = new AddressPool('10.201.9.0/28');
    assert.deepEqual([wide.allocate().slot, wide.allocate().slot], [0, 1]);
    wide.release(0);
    assert.equal(wide.allocate().slot, 2, 'the freed slot 0 waits while others are free');
    assert.equal(wide.allocate().slot, 3);
    assert.equal(wide.allocate().slot, 0, 'then it is given again');
    assert.equal(pool.reserve(1), false);
    assert.equal(pool.reserve(9), false);
  });

  it('passes over subnets that clash with the host network, and says so when none is left', () => {
    const ip = (a: string) => parseCidr(a).base;
    const host: HostNetwork = {
      addresses: [{ iface: 'eth0', address: ip('10.201.8.2') }],
      routes: [
        { iface: 'eth0', range: { first: 0, last: 0xffffffff >>> 0 }, prefix: 0, gateway: ip('10.201.8.5') },
        { iface: 'eth0', range: { first: ip('10.201.0.0'), last: ip('10.201.255.255') }, prefix: 16, gateway: 0 },
        { iface: 'svOther', range: { first: ip('10.201.8.8'), last: ip('10.201.8.11') }, prefix: 30, gateway: 0 },
      ],
    };
    const pool = new AddressPool('10.201.8.0/28', () => host);
    // .0/30 holds a host address, .4/30 the default gateway, .8/30 another agent's sandbox; the
    // /16 LAN route is as wide as the pool allows and does not clash.
    assert.equal(pool.allocate().hostAddress, '10.201.8.13');
    assert.throws(() => pool.allocate(), (e: SvcError) => e.status === 503 && /3 subnets clash with the host network, e.g. 10.201.8.0\/30 \(address of eth0\)/.test(e.message));
    assert.deepEqual(pool.widerRoutes(), ['eth0']);
  });

  it('parses CIDRs and bare addresses', () => {
    assert.deepEqual(parseCidr('10.1.2.3/8'), { base: parseCidr('10.0.0.0').base, prefix: 8 });
    assert.equal(intToIp(parseCidr('192.168.1.77/24').base), '192.168.1.0');
    assert.throws(() => parseCidr('10.0.0.0/33'));
    assert.throws(() => new AddressPool('10.0.0.0/31'));
  });
});

describe('egress policy', () => {
  it('keeps IPv4 CIDRs, drops IPv6 and wildcards, keeps allowOut host names to learn, refuses denyOut domains and junk', () => {
    const { policy, ignored } = normalizePolicy({ allowInternetAccess: false, allowOut: ['1.2.3.4', '10.9.8.7/8', 'Example.com', '*.wild.com', '::1'], denyOut: ['0.0.0.0/0'] });
    assert.deepEqual(policy, { allowInternetAccess: false, allowOut: ['1.2.3.4/32', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'], steer: [], allowOutHosts: ['example.com'] });
    assert.deepEqual(ignored, ['*.wild.com', '::1']);
    assert.throws(() => normalizePolicy({ allowInternetAccess: true, allowOut: [], denyOut: ['example.com'] }), (e: SvcError) => e.status === 400);
    assert.throws(() => normalizePolicy({ allowInternetAccess: true, allowOut: ['1.2.3.999'], denyOut: [] }), (e: SvcError) => e.status === 400);
    assert.throws(() => normalizePolicy({ allowInternetAccess: true, allowOut: ['a b'], denyOut: [] }), (e: SvcError) => e.status === 400);
  });
});

describe('release-ratio admission', () => {
  it('counts the unreleased part of paused sandboxes and refuses with the documented text (docs/design.md, Errors)', () => {
    const paused = { state: 'paused' as const, memoryMB: 512 };
    const others = [{ state: 'running' as const, memoryMB: 1024 }, { state: 'paused' as const, memoryMB: 1000 }];
    assert.equal(usedMemoryMB([...others, paused], 0.5), 1024 + 500 + 256);
    // ratio 0: nothing was released, resume always fits.
    checkResumeAdmission(paused, [paused, ...others], 100, 0);
    checkResumeAdmission(paused, [paused, ...others], 2048, 0.5);
    assert.throws(() => checkResumeAdmission(paused, [paused, ...others], 1800, 0.5), (e: SvcError) =>
      e.status === 409 && e.code === 130409 && e.message === 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 20MB');
  });
});

describe('resource names and request validation', () => {
  it('derives a per-state-dir tag and names that fit Linux limits', () => {
    const n = new ResourceNames('/var/lib/svc/node');
    assert.notEqual(n.tag, new ResourceNames('/tmp/other').tag);
    const id = ResourceNames.newInstanceId();
    assert.equal(n.hostVeth(id).length, 15);
    assert.equal(n.instanceOfNetns(n.netns(id)), id);
    assert.equal(n.instanceOfVeth(n.hostVeth(id)), id);
    assert.equal(n.instanceOfNetns(`svc-${n.tag}-x`), undefined);
    assert.equal(new ResourceNames('/tmp/other').instanceOfNetns(n.netns(id)), undefined);
  });

  // A bad request never reaches parseCreate: its route's schema refuses it (request-validation.test.ts).
  it('fills in the defaults of a create', () => {
    const base = {
      sandboxId: 'ixyz', templateId: 't', cpuCount: 1, memoryMB: 128,
      artifact: { artifactId: 'a1', sha256: 'A'.repeat(64), sizeBytes: 1, downloadUrl: 'http://x/a' },
    };
    const req = parseCreate(base, { diskSizeMB: 100, timeoutMs: 5000 });
    assert.equal(req.diskSizeMB, 100);
    assert.equal(req.timeoutMs, 5000);
    assert.equal(req.allowInternetAccess, true);
    assert.equal(req.artifact.sha256, 'a'.repeat(64));
    assert.deepEqual(req.network, { allowOut: [], denyOut: [], steer: [] });
    assert.equal(parseCreate({ ...base, diskSizeMB: 7, allowInternetAccess: false }, { diskSizeMB: 100, timeoutMs: 5000 }).diskSizeMB, 7);
  });
});

describe('an updateNetwork that narrows ends open connections (onlyWidens)', () => {
  const base: EgressPolicy = { allowInternetAccess: false, allowOut: ['10.0.0.0/8'], denyOut: ['1.1.1.1/32'], steer: [{ port: 443, scheme: 'https' }], allowOutHosts: ['a.example'], learned: ['9.9.9.9/32'] };
  it('widening keeps them: an allowOut entry or host added, a denyOut entry removed, internet access on; learned addresses aside', () => {
    for (const next of [
      { ...base }, { ...base, allowOut: [...base.allowOut, '192.168.0.0/16'] }, { ...base, denyOut: [] }, { ...base, allowInternetAccess: true },
      { ...base, allowOutHosts: ['a.example', 'b.example'] }, { ...base, learned: [] },
    ]) assert.equal(onlyWidens(base, next), true, JSON.stringify(next));
  });
  it('anything else narrows: an entry removed or added to denyOut, internet access off, other ports steered, tunnel changed', () => {
    const open = { ...base, allowInternetAccess: true };
    for (const [prev, next] of [
      [base, { ...base, allowOut: [] }], [base, { ...base, denyOut: [...base.denyOut, '8.8.8.8/32'] }], [open, { ...open, allowInternetAccess: false }],
      [base, { ...base, steer: [] }], [base, { ...base, steer: [{ port: 80, scheme: 'http' as const }] }], [base, { ...base, tunnel: true }], [base, { ...base, allowOutHosts: [] }],
    ] as Array<[EgressPolicy, EgressPolicy]>) assert.equal(onlyWidens(prev, next), false, JSON.stringify(next));
  });
});
