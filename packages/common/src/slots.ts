/**
 * A counting semaphore whose waits end with an AbortSignal: at most `size` holders at once, the
 * others queued in order. Used where work competes for the host's cores: the node agent's warm
 * starts over all templates (a node that came up with ten templates once booted twenty gVisor
 * sandboxes at once on two cores, each over its 60 s limit) and the template center's builds.
 */
export class Slots {
  private free: number;
  private readonly queue: Array<() => void> = [];

  constructor(size: number) { this.free = Math.max(1, size); }

  /** A free slot's release at once, or undefined when none is free. */
  tryAcquire(): (() => void) | undefined {
    if (this.free <= 0 || this.queue.length) return undefined;
    this.free--;
    return this.releaser();
  }

  /** Resolves with the slot's release once one is free; rejects when the signal aborts first. */
  acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const now = this.tryAcquire();
    if (now) return Promise.resolve(now);
    const release = this.releaser();
    return new Promise((resolve, reject) => {
      const grant = () => { signal.removeEventListener('abort', onAbort); resolve(release); };
      const onAbort = () => {
        const i = this.queue.indexOf(grant);
        if (i >= 0) this.queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(grant);
    });
  }

  /** A release that frees its slot once however often it is called (a finally after a catch). */
  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.queue.shift();
      if (next) next();
      else this.free++;
    };
  }
}
