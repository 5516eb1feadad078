/**
 * One holder at a time, the others wait in order. A waiter whose signal aborts leaves the queue
 * and gets undefined instead of a release.
 */
export class Lock {
  private held = false;
  private readonly waiters: Array<() => void> = [];

  acquire(signal?: AbortSignal): Promise<(() => void) | undefined> {
    if (signal?.aborted) return Promise.resolve(undefined);
    if (!this.held) {
      this.held = true;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve) => {
      const onAbort = () => {
        const at = this.waiters.indexOf(wake);
        if (at >= 0) this.waiters.splice(at, 1);
        resolve(undefined);
      };
      const wake = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(this.releaser());
      };
      this.waiters.push(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.held = false;
    };
  }
}
