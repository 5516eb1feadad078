import type { BuildLog } from './build-log.ts';

/** The builds one master runs at once; the others wait in arrival order. */
export class BuildSlots {
  busy = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly size: number) {}

  get free(): boolean { return this.busy < this.size && this.queue.length === 0; }
  get waiting(): number { return this.queue.length; }

  acquire(): Promise<void> {
    if (this.free) { this.busy++; return Promise.resolve(); }
    return new Promise((resolve) => this.queue.push(() => { this.busy++; resolve(); }));
  }

  release(): void {
    this.busy--;
    this.queue.shift()?.();
  }

  /** Runs `work` once one of the master's build slots is free; a line a minute while it waits. */
  async inSlot<T>(log: BuildLog, work: () => Promise<T>): Promise<T> {
    if (!this.free) {
      await log('info', `Queued: ${this.busy} build(s) running on this master, ${this.waiting} waiting before this one`);
      const ticker = setInterval(() => { void log('info', 'Still queued').catch(() => { /* the next line says it again */ }); }, 60_000);
      try {
        await this.acquire();
      } finally {
        clearInterval(ticker);
      }
      await log('info', 'Starting: a build slot is free');
    } else {
      await this.acquire();
    }
    try {
      return await work();
    } finally {
      this.release();
    }
  }
}
