import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { PolicyStore } from './policy-store.ts';
import { applyPolicyChange, replicaOf, snapshotOf, type PolicyChange } from './policy-sync.ts';

const p = (sandboxId: string, address: string): SandboxEgressPolicy => ({ sandboxId, address, rules: [] });

/** The primary's store with every change it sends on, as the admin API and the bootstrap do. */
function primary() {
  const store = new PolicyStore();
  const sent: PolicyChange[] = [];
  return {
    store,
    sent,
    put: (policy: SandboxEgressPolicy) => { store.put(policy); sent.push({ kind: 'put', policy }); },
    del: (id: string) => { store.delete(id); sent.push({ kind: 'delete', sandboxId: id }); },
    replaceAll: (list: SandboxEgressPolicy[]) => { store.replaceAll(list); sent.push({ kind: 'replace', policies: store.list() }); },
  };
}

const view = (s: PolicyStore) => ({ ready: s.ready, list: s.list().sort((a, b) => a.sandboxId.localeCompare(b.sandboxId)), at: s.forAddress('10.0.0.2')?.sandboxId });

test('a replica fed the primary\'s changes holds what the primary holds, a put that raced the bootstrap included', () => {
  const m = primary();
  const early = replicaOf(snapshotOf(m.store));
  assert.equal(early.ready, false);
  m.store.beginBootstrap();
  m.put(p('new', '10.0.0.2'));
  m.del('gone');
  // The master's list is older than both changes: the primary keeps them, and the replica gets the merged list.
  m.replaceAll([p('old', '10.0.0.5'), p('gone', '10.0.0.3'), p('other', '10.0.0.4')]);
  m.put(p('displacer', '10.0.0.4'));
  for (const c of m.sent) applyPolicyChange(early, c);
  assert.deepEqual(view(early), view(m.store));
  assert.deepEqual(view(m.store).list.map((x) => x.sandboxId), ['displacer', 'new', 'old']);

  // A worker forked now starts from the snapshot alone.
  assert.deepEqual(view(replicaOf(snapshotOf(m.store))), view(m.store));
});

test('markReady reaches a replica as `ready`', () => {
  const replica = replicaOf({ policies: [p('a', '10.0.0.2')], ready: false });
  assert.equal(replica.ready, false);
  applyPolicyChange(replica, { kind: 'ready' });
  assert.equal(replica.ready, true);
  assert.equal(replica.forAddress('10.0.0.2')?.sandboxId, 'a');
});
