import { createHash } from 'node:crypto';
import type { Coordination, Logger } from '@svc/common';

export type Outcome<T> = { value: T; reusedFrom?: string };

const LEASE_TTL_MS = 60_000;
const RESULT_TTL_MS = 10 * 60_000;
const POLL_MS = 500;

/**
 * Coordinates builds of the same spec (docs/design.md, "Build jobs"): while one build of a
 * specHash runs, a second one does not build again; it waits for the first and reuses its
 * result, so both jobs report BUILT with the same artifact. If the first fails, the waiter builds
 * on its own (its failure, if any, is then its own to report).
 *
 * In one process the waiter awaits the winner's promise directly. Across replicas the winner
 * holds a lease named after the spec (renewed while it builds) and publishes its result in the
 * kv under the lease holder's name; a waiter watches the lease and reads that result when the
 * lease is released. A holder that dies lets its lease expire and a waiter takes over.
 */
export class SpecDedup<T> {
  private readonly inflight = new Map<string, { holder: string; promise: Promise<T> }>();

  constructor(private readonly coordination: Coordination, private readonly logger: Logger) {}

  async run(specHash: string, holder: string, build: () => Promise<T>, opts: { signal: AbortSignal; onWait?: (holder: string) => void }): Promise<Outcome<T>> {
    const lease = leaseName(specHash);
    for (;;) {
      opts.signal.throwIfAborted();
      const local = this.inflight.get(specHash);
      if (local) {
        opts.onWait?.(local.holder);
        try {
          return { value: await untilAborted(local.promise, opts.signal), reusedFrom: local.holder };
        } catch {
          continue; // the winner failed (try to build) or this job was cancelled (the loop's check throws)
        }
      }
      if (await this.coordination.acquireLease(lease, holder, LEASE_TTL_MS)) {
        return { value: await this.buildHolding(specHash, lease, holder, build) };
      }
      const other = await this.coordination.leaseHolder(lease);
      if (!other) continue;
      opts.onWait?.(other);
      const reused = await this.waitForRelease(lease, other, opts.signal);
      if (reused !== undefined) return { value: reused, reusedFrom: other };
    }
  }

  private async buildHolding(specHash: string, lease: string, holder: string, build: () => Promise<T>): Promise<T> {
    const renew = setInterval(() => {
      this.coordination.acquireLease(lease, holder, LEASE_TTL_MS).catch((err) => this.logger.warn({ err: (err as Error).message }, 'spec lease renewal failed'));
    }, LEASE_TTL_MS / 3);
    renew.unref();
    const promise = build();
    this.inflight.set(specHash, { holder, promise });
    try {
      const value = await promise;
      await this.coordination.kvSet(resultKey(lease, holder), JSON.stringify(value), RESULT_TTL_MS);
      return value;
    } finally {
      clearInterval(renew);
      this.inflight.delete(specHash);
      await this.coordination.releaseLease(lease, holder).catch(() => { /* the lease expires with its TTL */ });
    }
  }

  /** Waits until `other` no longer holds the lease; its result, or undefined when it left none. */
  private async waitForRelease(lease: string, other: string, signal: AbortSignal): Promise<T | undefined> {
    for (;;) {
      await sleep(POLL_MS, signal);
      const now = await this.coordination.leaseHolder(lease);
      if (now === other) continue;
      const raw = await this.coordination.kvGet(resultKey(lease, other));
      return raw ? (JSON.parse(raw) as T) : undefined;
    }
  }
}

/** Lease names stay under 64 characters whatever the spec hash looks like. */
function leaseName(specHash: string): string {
  return `tc:spec:${createHash('sha256').update(specHash).digest('hex').slice(0, 40)}`;
}

const resultKey = (lease: string, holder: string) => `${lease}:result:${holder}`;

/**
 * The winner's result, or the job's cancel, whichever comes first: a waiter whose template was
 * deleted held its build slot until the winner finished (left open at stop 57).
 */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal.reason); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
