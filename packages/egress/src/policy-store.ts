import type { SandboxEgressPolicy } from '@svc/contracts/egress';

/** Told the source addresses whose policy changed or went, after the store changed. */
export type PolicyChangeListener = (addresses: string[]) => void;

/**
 * Every sandbox's egress policy, by sandbox id and by source address. An address belongs to one
 * sandbox at a time: a newer policy at an address replaces the older sandbox's, whose address
 * was given out again. Listeners hear of every address whose policy changed (a put that differs
 * from what was there, a delete, a replace): the data path ends that sandbox's open connections,
 * which were decided by the old policy (docs/egress.md "Changing a policy").
 */
export class PolicyStore {
  private readonly listeners = new Set<PolicyChangeListener>();
  private readonly byId = new Map<string, SandboxEgressPolicy>();
  private readonly byAddress = new Map<string, SandboxEgressPolicy>();
  private secrets: Set<string> | undefined;
  private isReady = false;
  /** Ids changed through put/delete while a bootstrap load was under way: newer than its answer. */
  private touchedDuringBootstrap: Set<string> | undefined;

  get ready(): boolean {
    return this.isReady;
  }

  get size(): number {
    return this.byId.size;
  }

  forAddress(address: string): SandboxEgressPolicy | undefined {
    return this.byAddress.get(address);
  }

  get(sandboxId: string): SandboxEgressPolicy | undefined {
    return this.byId.get(sandboxId);
  }

  list(): SandboxEgressPolicy[] {
    return [...this.byId.values()];
  }

  /** Hears of the addresses whose policy changed; returns the unsubscribe. */
  onChange(listener: PolicyChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stores a policy; returns the id of another sandbox it displaced from the same address. */
  put(policy: SandboxEgressPolicy): { displaced?: string } {
    this.touchedDuringBootstrap?.add(policy.sandboxId);
    const before = this.byId.get(policy.sandboxId);
    const unchanged = before !== undefined && this.byAddress.get(policy.address) === before && samePolicy(before, policy);
    const result = this.store(policy);
    if (!unchanged) this.changed(before && before.address !== policy.address ? [policy.address, before.address] : [policy.address]);
    return result;
  }

  /** Idempotent. */
  delete(sandboxId: string): boolean {
    this.touchedDuringBootstrap?.add(sandboxId);
    const before = this.byId.get(sandboxId);
    const removed = this.remove(sandboxId);
    if (removed && before) this.changed([before.address]);
    return removed;
  }

  /** Call before asking the master for every policy: puts and deletes from now on win over its answer. */
  beginBootstrap(): void {
    this.touchedDuringBootstrap = new Set();
  }

  /**
   * The master's full list: replaces everything except the sandboxes changed since
   * beginBootstrap (their put or delete is newer than the list), then the store is ready.
   */
  replaceAll(policies: SandboxEgressPolicy[]): void {
    const keep = this.touchedDuringBootstrap ?? new Set<string>();
    const before = new Map(this.byAddress);
    for (const id of [...this.byId.keys()]) if (!keep.has(id)) this.remove(id);
    for (const p of policies) if (!keep.has(p.sandboxId)) this.store(p);
    this.touchedDuringBootstrap = undefined;
    this.isReady = true;
    const changed: string[] = [];
    for (const [address, old] of before) {
      const now = this.byAddress.get(address);
      if (!now || !samePolicy(old, now)) changed.push(address);
    }
    if (changed.length) this.changed(changed);
  }

  markReady(): void {
    this.touchedDuringBootstrap = undefined;
    this.isReady = true;
  }

  /** Every inject secret and proxy password configured now, for the audit log's redaction. */
  liveSecrets(): Set<string> {
    if (this.secrets === undefined) {
      this.secrets = new Set();
      for (const p of this.byId.values()) for (const s of policySecrets(p)) this.secrets.add(s);
    }
    return this.secrets;
  }

  private changed(addresses: string[]): void {
    for (const listener of this.listeners) listener(addresses);
  }

  private store(policy: SandboxEgressPolicy): { displaced?: string } {
    this.remove(policy.sandboxId);
    const holder = this.byAddress.get(policy.address);
    let displaced: string | undefined;
    if (holder && holder.sandboxId !== policy.sandboxId) {
      this.remove(holder.sandboxId);
      displaced = holder.sandboxId;
    }
    this.byId.set(policy.sandboxId, policy);
    this.byAddress.set(policy.address, policy);
    this.secrets = undefined;
    return displaced ? { displaced } : {};
  }

  private remove(sandboxId: string): boolean {
    const old = this.byId.get(sandboxId);
    if (!old) return false;
    this.byId.delete(sandboxId);
    if (this.byAddress.get(old.address) === old) this.byAddress.delete(old.address);
    this.secrets = undefined;
    return true;
  }
}

/**
 * Whether two policies say the same: the master sends a sandbox's policy again unchanged (a
 * resync, a move), which must not cut its connections. Both come from the same serializer (the
 * master's JSON, or structured clone of it), so their keys are in the same order.
 */
function samePolicy(a: SandboxEgressPolicy, b: SandboxEgressPolicy): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** A policy's inject secrets and proxy password. */
export function* policySecrets(p: SandboxEgressPolicy): Iterable<string> {
  for (const r of p.rules) for (const i of r.action.inject ?? []) if (i.secret) yield i.secret;
  for (const t of p.transforms ?? []) for (const i of t.inject) if (i.secret) yield i.secret;
  if (p.tunnel?.password) yield p.tunnel.password;
}
