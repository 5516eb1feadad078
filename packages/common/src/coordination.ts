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

let acquisitions = 0;

/**
 * A holder for one acquisition: the caller's (a process's) name and a count. A lock that lapsed
 * under a holder shared by the whole process was dropped by that process's next unlock while
 * another of its requests held it again (found by a helper reading the master as an attacker).
 */
function oneAcquisition(holder: string): string {
  acquisitions = (acquisitions + 1) % Number.MAX_SAFE_INTEGER;
  return `${holder}#${acquisitions}`;
}

/** What fn is handed while it holds a lock. */
export interface HeldLock {
  /**
   * Whether this acquisition holds the lock still, renewing it for a full TTL when it does. A
   * renewal that failed (the store was away longer than the TTL) may have let another holder in:
   * a write that must not overwrite that holder's (a read-modify-write) asks this first.
   */
  stillHeld(): Promise<boolean>;
}

/**
 * Runs fn as the holder of a lock it has taken, renewed every third of its TTL while fn runs (a
 * step slower than the TTL, a pause uploading gigabytes, keeps it), and released after. Only a
 * crash leaves it to its TTL.
 */
async function holding<T>(c: Coordination, name: string, holder: string, ttlMs: number, fn: (lock: HeldLock) => Promise<T>): Promise<T> {
  // Taken just before this runs; each renewal that lands holds it for ttlMs from when it was asked.
  let heldUntil = Date.now() + ttlMs;
  let lapsed = false;
  const renewNow = async (): Promise<boolean> => {
    const asked = Date.now();
    const held = await c.acquireLease(name, holder, ttlMs);
    // For good once lapsed: a lock taken back after it expired (it was free again) may have had
    // another holder in between, who wrote what this holder read before.
    if (!held || asked > heldUntil) lapsed = true;
    else heldUntil = asked + ttlMs;
    return !lapsed;
  };
  const renew = setInterval(() => {
    renewNow().catch(() => {
      // The next renewal tries again; one that lands after the TTL marks the lock lapsed.
    });
  }, Math.max(50, Math.floor(ttlMs / 3)));
  renew.unref();
  const lock: HeldLock = { stillHeld: async () => !lapsed && renewNow() };
  try {
    return await fn(lock);
  } finally {
    clearInterval(renew);
    // Only this acquisition's own: the store drops the lock only while it still names this holder.
    await c.unlock(name, holder).catch(() => { /* the lock expires with its TTL: a failed unlock only delays the next holder */ });
  }
}

/**
 * Runs fn while holding the lock (renewed while it runs), asked for again every 10 to 30 ms for
 * up to `waitMs`; `busy()` is thrown when it stays taken. A failed unlock is left to the lock's TTL.
 */
export async function withLockWaiting<T>(
  c: Coordination, name: string, holder: string, o: { ttlMs: number; waitMs: number; busy: () => Error }, fn: (lock: HeldLock) => Promise<T>,
): Promise<T> {
  const mine = oneAcquisition(holder);
  const deadline = Date.now() + o.waitMs;
  while (!(await c.tryLock(name, mine, o.ttlMs))) {
    if (Date.now() > deadline) throw o.busy();
    await new Promise((r) => setTimeout(r, 10 + Math.random() * 20));
  }
  return holding(c, name, mine, o.ttlMs, fn);
}

/** Runs fn while holding the lock (renewed while it runs); does not run fn when the lock is taken. */
export async function withLock<T>(
  c: Coordination, name: string, holder: string, ttlMs: number, fn: (lock: HeldLock) => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  const mine = oneAcquisition(holder);
  if (!(await c.tryLock(name, mine, ttlMs))) return { acquired: false };
  return { acquired: true, value: await holding(c, name, mine, ttlMs, fn) };
}

/**
 * Runs fn under a lease renewed while fn runs, which expires ttlMs after a crash, so a replica
 * that dies mid-operation blocks the others for at most one TTL; taken at once or not at all.
 * `holder` must be unique to this one operation (a lease is renewable by its holder).
 */
export async function withRenewedLock<T>(
  c: Coordination, name: string, holder: string, ttlMs: number, fn: (lock: HeldLock) => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  if (!(await c.acquireLease(name, holder, ttlMs))) return { acquired: false };
  return { acquired: true, value: await holding(c, name, holder, ttlMs, fn) };
}
