import { createHash } from 'node:crypto';
import { MAX_LOCK_NAME, type Coordination } from '@svc/common';

/** The per-sandbox lock that serialises pause, resume and kill across replicas. */
export function sandboxLockName(sandboxId: string): string {
  const name = `lc:sbx:${sandboxId}`;
  if (name.length <= MAX_LOCK_NAME) return name;
  return `lc:sbx:${createHash('sha256').update(sandboxId).digest('hex').slice(0, 40)}`;
}

/**
 * Runs fn under a lock that is renewed while fn runs and expires ttlMs after a crash, so a
 * replica that dies mid-operation blocks the sandbox for at most one TTL. It is built on the
 * lease primitive (renewable by its holder); `holder` must be unique to this one operation.
 */
export async function withRenewedLock<T>(
  coord: Coordination, name: string, holder: string, ttlMs: number, fn: () => Promise<T>,
): Promise<{ acquired: true; value: T } | { acquired: false }> {
  if (!(await coord.acquireLease(name, holder, ttlMs))) return { acquired: false };
  const renew = setInterval(() => { coord.acquireLease(name, holder, ttlMs).catch(() => { /* the next renewal tries again; a lease lost meanwhile is found at release */ }); }, Math.max(50, Math.floor(ttlMs / 3)));
  try {
    return { acquired: true, value: await fn() };
  } finally {
    clearInterval(renew);
    await coord.releaseLease(name, holder).catch(() => { /* the lease expires with its TTL */ });
  }
}
