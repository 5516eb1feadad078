/**
 * A count of warm starts under way on the whole node. Each template's pool starts at most
 * `concurrency` at once, but a node that comes up with many templates fills all their pools at
 * the same moment: with ten templates that was twenty gVisor boots on two cores, each taking over
 * 60 s and failing its boot timeout, and starving every other process of `svc up` (a CI run's
 * egress worker did not start within 30 s). The slots bound the node, whatever the templates.
 */
export class StartSlots {
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
