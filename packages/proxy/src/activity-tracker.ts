import type { Logger } from '@svc/common';
import type { MasterInternalClient } from '@svc/master/internal-api';

/**
 * Collects which sandboxes saw traffic and reports them to the master about once a second,
 * in one call. A request or WebSocket that stays open keeps its sandbox in every report
 * until it closes, so a long stream never lets the sandbox look idle.
 */
export class ActivityTracker {
  private touched = new Set<string>();
  private readonly open = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  /** Logged once per outage, not once a second. */
  private failing = false;

  constructor(private readonly master: MasterInternalClient, flushMs: number, private readonly logger: Logger) {
    this.timer = setInterval(() => { this.flushing = this.flush(); }, flushMs);
    this.timer.unref();
  }

  /** A request or stream for the sandbox began; pair with end(). */
  begin(sandboxId: string): void {
    this.touched.add(sandboxId);
    this.open.set(sandboxId, (this.open.get(sandboxId) ?? 0) + 1);
  }

  end(sandboxId: string): void {
    const n = this.open.get(sandboxId);
    if (n === undefined) return;
    if (n <= 1) this.open.delete(sandboxId);
    else this.open.set(sandboxId, n - 1);
    this.touched.add(sandboxId);
  }

  async flush(): Promise<void> {
    const ids = this.touched;
    this.touched = new Set();
    for (const id of this.open.keys()) ids.add(id);
    if (ids.size === 0) return;
    const sandboxIds = [...ids];
    try {
      await this.master.reportActivity({ sandboxIds });
      if (this.failing) this.logger.info('activity reports reach the master again');
      this.failing = false;
    } catch (err) {
      // Kept for the next flush: a missed report would let a busy sandbox be paused.
      for (const id of sandboxIds) this.touched.add(id);
      if (!this.failing) this.logger.warn({ count: sandboxIds.length, err: (err as Error).message }, 'activity report failed');
      this.failing = true;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }
}
