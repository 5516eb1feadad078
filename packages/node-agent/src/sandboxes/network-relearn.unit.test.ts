/**
 * relearnHosts on a real conntrack table: an address an allowOut host name no longer has loses
 * its tracked flows; the sandbox's other flows stay.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { EgressPolicy } from '../network/egress-policy.ts';
import type { Instance } from './instances.ts';
import { SandboxNetworkPolicy, droppedAddresses, type NetworkPolicyDeps } from './network-policy.ts';
import type { SandboxTable } from './sandbox-table.ts';

const isRoot = process.getuid?.() === 0;
const SANDBOX = '10.254.9.2';
const flow = (dst: string, sport: number) => ['-s', SANDBOX, '-d', dst, '-p', 'tcp', '--sport', String(sport), '--dport', '443'];
const tracked = (dst: string) => execFileSync('conntrack', ['-L', '-s', SANDBOX, '-d', dst], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).includes(dst);

test('a relearned host name that lost an address ends the sandbox\'s flows to it, and only those', { skip: isRoot ? false : 'needs root (conntrack)' }, async (t) => {
  const policy: EgressPolicy = { allowInternetAccess: false, allowOut: [], denyOut: [], steer: [], allowOutHosts: ['api.example.com'], learned: ['192.0.2.10/32', '192.0.2.11/32'] };
  const inst = { record: { sandboxId: 'sb1', instanceId: 'i1', address: SANDBOX, phase: 'running', policy } } as unknown as Instance;
  const table = { all: () => [inst], locks: { run: (_id: string, fn: () => Promise<void>) => fn() } } as unknown as SandboxTable;
  const updates: EgressPolicy[] = [];
  const d = {
    logger: silentLogger(),
    firewall: { update: async (_id: string, p: EgressPolicy) => { updates.push(p); } },
    records: { save: async () => {} },
    hosts: { learn: async () => ['192.0.2.11/32', '192.0.2.12/32'] },
  } as unknown as NetworkPolicyDeps;
  t.after(() => { try { execFileSync('conntrack', ['-D', '-s', SANDBOX], { stdio: 'ignore' }); } catch { /* none left */ } });
  execFileSync('conntrack', ['-I', ...flow('192.0.2.10', 40010), '--state', 'ESTABLISHED', '-t', '120']);
  execFileSync('conntrack', ['-I', ...flow('192.0.2.11', 40011), '--state', 'ESTABLISHED', '-t', '120']);
  await new SandboxNetworkPolicy(d, table).relearnHosts();
  assert.deepEqual(updates.map((p) => p.learned), [['192.0.2.11/32', '192.0.2.12/32']]);
  assert.equal(tracked('192.0.2.10'), false, 'the flow to the address the name lost ended');
  assert.equal(tracked('192.0.2.11'), true, 'the flow to an address it still has goes on');
});

test('with internet access and no denyOut, a lost address narrows nothing', () => {
  const p = (over: Partial<EgressPolicy>): EgressPolicy => ({ allowInternetAccess: true, allowOut: [], denyOut: [], steer: [], learned: ['192.0.2.10/32'], ...over });
  assert.deepEqual(droppedAddresses(p({}), p({ learned: [] })), []);
  assert.deepEqual(droppedAddresses(p({ denyOut: ['192.0.2.0/24'] }), p({ denyOut: ['192.0.2.0/24'], learned: [] })), ['192.0.2.10']);
  assert.deepEqual(droppedAddresses(p({ allowInternetAccess: false }), p({ allowInternetAccess: false, allowOut: ['192.0.2.10/32'], learned: [] })), []);
});
