/** The key of waiters that name none: one queue shared by all of them (a symbol, so no string is it). */
const SHARED = Symbol('shared');
type Key = string | typeof SHARED;

/**
 * A counting semaphore whose waits end with an AbortSignal: at most `size` holders at once, the
 * others queued. Used where work competes for the host's cores: the node agent's warm starts over
 * all templates (a node that came up with ten templates once booted twenty gVisor sandboxes at
 * once on two cores, each over its 60 s limit), the master's and the template center's builds.
 *
 * Waiters are queued by key (a team's id) and the keys take turns: a freed slot goes to the
 * oldest waiter of the key next in the rotation, not to the oldest waiter overall, so a team that
 * queued twenty builds does not make every other team wait behind all twenty. Within a key,
 * arrival order. A key joins the rotation at its back when it gets a waiter, and leaves it when
 * it has none. Waiters without a key share one, which is plain arrival order.
 */
export class Slots {
  private free: number;
  private readonly size: number;
  /** Each key's waiters in arrival order; a key is here exactly while it is in the rotation. */
  private readonly queues = new Map<Key, Array<() => void>>();
  /** Keys with waiters, the next to be served first; a served key that still waits goes to the back. */
  private readonly rotation: Key[] = [];

  constructor(size: number) {
    this.size = Math.max(1, size);
    this.free = this.size;
  }

  /** Slots held now. */
  get held(): number { return this.size - this.free; }

  /** A free slot's release at once, or undefined when none is free (or anyone waits: nobody jumps the queue). */
  tryAcquire(): (() => void) | undefined {
    if (this.free <= 0 || this.rotation.length) return undefined;
    this.free--;
    return this.releaser();
  }

  /**
   * How many of the waiters now would be served before a waiter of `key` that came now, as the
   * keys take turns (waiters that come later may still go before it: a new key's first waiter
   * is served before this key's later turns).
   */
  waitingAhead(key?: string): number {
    const k = key ?? SHARED;
    const depth = this.queues.get(k)?.length ?? 0; // the turns this key takes before the new waiter's
    const at = this.rotation.indexOf(k); // -1: the key joins at the back
    let ahead = 0;
    this.rotation.forEach((other, i) => {
      const len = this.queues.get(other)!.length;
      // Each key is served once a round: `depth` full rounds, then the keys before this one in the last.
      ahead += Math.min(len, depth) + (len > depth && (at === -1 || i < at) ? 1 : 0);
    });
    return ahead;
  }

  /**
   * Resolves with the slot's release once one is free and it is `key`'s turn (no key: the shared
   * queue); rejects when the signal aborts first, leaving the queue as if it had never waited.
   */
  acquire(signal: AbortSignal, key?: string): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const now = this.tryAcquire();
    if (now) return Promise.resolve(now);
    const k = key ?? SHARED;
    const release = this.releaser();
    return new Promise((resolve, reject) => {
      const grant = () => { signal.removeEventListener('abort', onAbort); resolve(release); };
      const onAbort = () => {
        this.remove(k, grant);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const queue = this.queues.get(k);
      if (queue) queue.push(grant);
      else {
        this.queues.set(k, [grant]);
        this.rotation.push(k);
      }
    });
  }

  /** An aborted waiter leaves its key's queue, and the key the rotation when that empties it. */
  private remove(key: Key, grant: () => void): void {
    const queue = this.queues.get(key);
    const i = queue?.indexOf(grant) ?? -1;
    if (!queue || i < 0) return; // granted already: its release frees the slot
    queue.splice(i, 1);
    if (queue.length) return;
    this.queues.delete(key);
    this.rotation.splice(this.rotation.indexOf(key), 1);
  }

  /** The next waiter in turn, taken off its queue; undefined when nobody waits. */
  private next(): (() => void) | undefined {
    const key = this.rotation.shift();
    if (key === undefined) return undefined;
    const queue = this.queues.get(key)!;
    const grant = queue.shift()!;
    if (queue.length) this.rotation.push(key);
    else this.queues.delete(key);
    return grant;
  }

  /** A release that frees its slot once however often it is called (a finally after a catch). */
  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.next();
      if (next) next();
      else this.free++;
    };
  }
}
