/**
 * relearnHosts on a real conntrack table: a relearned allowOut host name gets its new addresses
 * in the firewall, and the sandbox's tracked flows stay, to an address the name no longer gives
 * too. Round-robin DNS rotates addresses between lookups and a failed lookup gives none, so
 * ending those flows (2026-12-01) cut live streams, websockets and clones every 60 s.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { silentLogger } from '@svc/common';
import type { EgressPolicy } from '../network/egress-policy.ts';
import type { Instance } from './instances.ts';
import { SandboxNetworkPolicy, type NetworkPolicyDeps } from './network-policy.ts';
import type { SandboxTable } from './sandbox-table.ts';

const isRoot = process.getuid?.() === 0;
const SANDBOX = '10.254.9.2';
const flow = (dst: string, sport: number) => ['-s', SANDBOX, '-d', dst, '-p', 'tcp', '--sport', String(sport), '--dport', '443'];
const tracked = (dst: string) => execFileSync('conntrack', ['-L', '-s', SANDBOX, '-d', dst], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).includes(dst);

for (const [what, answer] of [['rotated addresses', ['192.0.2.11/32', '192.0.2.12/32']], ['a failed lookup', []]] as const) {
  test(`relearning host names (${what}) updates the firewall and keeps the sandbox's tracked flows`, { skip: isRoot ? false : 'needs root (conntrack)' }, async (t) => {
    const policy: EgressPolicy = { allowInternetAccess: false, allowOut: [], denyOut: [], steer: [], allowOutHosts: ['api.example.com'], learned: ['192.0.2.10/32', '192.0.2.11/32'] };
    const inst = { record: { sandboxId: 'sb1', instanceId: 'i1', address: SANDBOX, phase: 'running', policy } } as unknown as Instance;
    const table = { all: () => [inst], locks: { run: (_id: string, fn: () => Promise<void>) => fn() } } as unknown as SandboxTable;
    const updates: EgressPolicy[] = [];
    const d = {
      logger: silentLogger(),
      firewall: { update: async (_id: string, p: EgressPolicy) => { updates.push(p); } },
      records: { save: async () => {} },
      hosts: { learn: async () => [...answer] },
    } as unknown as NetworkPolicyDeps;
    t.after(() => { try { execFileSync('conntrack', ['-D', '-s', SANDBOX], { stdio: 'ignore' }); } catch { /* none left */ } });
    execFileSync('conntrack', ['-I', ...flow('192.0.2.10', 40010), '--state', 'ESTABLISHED', '-t', '120']);
    execFileSync('conntrack', ['-I', ...flow('192.0.2.11', 40011), '--state', 'ESTABLISHED', '-t', '120']);
    await new SandboxNetworkPolicy(d, table).relearnHosts();
    assert.deepEqual(updates.map((p) => p.learned), [answer]);
    assert.equal(tracked('192.0.2.10'), true, 'a flow to an address the name no longer gives goes on');
    assert.equal(tracked('192.0.2.11'), true, answer.length ? 'a flow to an address it still has goes on' : 'a failed lookup ends nothing');
  });
}
