import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { PolicyStore } from './policy-store.ts';

/**
 * A change of the primary's PolicyStore, as the primary sends it to every worker's replica
 * (docs/egress.md "Worker processes"). `replace` is the bootstrap's result as the primary's
 * store holds it after replaceAll, already merged with the puts and deletes that raced it, so
 * a replica needs no bootstrap state of its own; `ready` is markReady with no policy source.
 */
export type PolicyChange =
  | { kind: 'put'; policy: SandboxEgressPolicy }
  | { kind: 'delete'; sandboxId: string }
  | { kind: 'replace'; policies: SandboxEgressPolicy[] }
  | { kind: 'ready' };

/** What a worker's replica starts from: the primary's store when the worker is forked. */
export interface PolicySnapshot {
  policies: SandboxEgressPolicy[];
  ready: boolean;
}

export function isPolicyChange(body: unknown): body is PolicyChange {
  const kind = (body as { kind?: unknown } | undefined)?.kind;
  return kind === 'put' || kind === 'delete' || kind === 'replace' || kind === 'ready';
}

export function snapshotOf(store: PolicyStore): PolicySnapshot {
  return { policies: store.list(), ready: store.ready };
}

/** A replica that holds exactly the snapshot's policies, ready as the primary was. */
export function replicaOf(snapshot: PolicySnapshot): PolicyStore {
  const store = new PolicyStore();
  // One policy per address in a store's list: no put displaces another here.
  for (const p of snapshot.policies) store.put(p);
  if (snapshot.ready) store.markReady();
  return store;
}

/**
 * Applies a change to a replica. The store's operations are deterministic, so the replica ends
 * as the primary's store did (a put displaces the same older sandbox from its address).
 */
export function applyPolicyChange(store: PolicyStore, change: PolicyChange): void {
  switch (change.kind) {
    case 'put': store.put(change.policy); break;
    case 'delete': store.delete(change.sandboxId); break;
    // No bootstrap is under way in a replica: replaceAll replaces every policy.
    case 'replace': store.replaceAll(change.policies); break;
    case 'ready': store.markReady(); break;
  }
}
