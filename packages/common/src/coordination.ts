/**
 * Leases, locks, events and a small shared key-value store. Embedded mode keeps them in
 * process (memory-coordination.ts); scale-out mode keeps them in Redis (redis-coordination.ts).
 * Lease and lock names stay under 64 characters (docs/design.md, "Limits").
 */
export interface Coordination {
  /** Acquires the lease, or renews it when `holder` already holds it. True when held afterwards. */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  releaseLease(name: string, holder: string): Promise<void>;
  /** Who holds the lease now, or null. */
  leaseHolder(name: string): Promise<string | null>;
  /** A mutual-exclusion lock with an expiry, so a crashed holder cannot wedge it. */
  tryLock(name: string, holder: string, ttlMs: number): Promise<boolean>;
  unlock(name: string, holder: string): Promise<void>;
  publish(topic: string, event: unknown): Promise<void>;
  /** Returns an unsubscribe function. Delivery is at most once, to every live subscriber. */
  subscribe(topic: string, handler: (event: unknown) => void): () => void;
  kvSet(key: string, value: string, ttlMs?: number): Promise<void>;
  kvGet(key: string): Promise<string | null>;
  kvDel(key: string): Promise<void>;
  close(): Promise<void>;
}

export const MAX_LOCK_NAME = 63;

export function checkLockName(name: string): void {
  if (name.length > MAX_LOCK_NAME) throw new Error(`lock name too long (${name.length} > ${MAX_LOCK_NAME}): ${name}`);
}

/**
 * Runs fn while holding the lock, asked for again every 10 to 30 ms for up to `waitMs`; `busy()`
 * is thrown when it stays taken. A failed unlock is left to the lock's TTL.
 */
export async function withLockWaiting<T>(
  c: Coordination, name: string, holder: string, o: { ttlMs: number; waitMs: number; busy: () => Error }, fn: () => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + o.waitMs;
  while (!(await c.tryLock(name, holder, o.ttlMs))) {
    if (Date.now() > deadline) throw o.busy();
    await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
  }
  try {
    return await fn();
  } finally {
    await c.unlock(name, holder).catch(() => { /* the lock expires with its TTL: a failed unlock only delays the next holder */ });
  }
}

/** Runs fn while holding the lock; returns undefined (without running fn) when the lock is taken. */
export async function withLock<T>(
  c: Coordination, name: string, holder: string, ttlMs: number, fn: () => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  if (!(await c.tryLock(name, holder, ttlMs))) return { acquired: false };
  try {
    return { acquired: true, value: await fn() };
  } finally {
    await c.unlock(name, holder).catch(() => { /* the lock expires with its TTL: a failed unlock only delays the next holder */ });
  }
}
