import type { Logger } from '@svc/common';
import type { MasterInternalClient } from '@svc/contracts/master-internal';

/**
 * Collects which sandboxes saw traffic and reports them to the master about once a second, in
 * one call. Traffic is bytes: a request that starts, and every chunk moved in either direction
 * afterwards. A stream or WebSocket that stays open but silent is idle (docs/data-plane.md,
 * "Activity"), so a sandbox whose client keeps a quiet connection open still times out.
 */
export class ActivityTracker {
  private touched = new Set<string>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  /** Logged once per outage, not once a second. */
  private failing = false;

  constructor(private readonly master: MasterInternalClient, flushMs: number, private readonly logger: Logger) {
    this.timer = setInterval(() => { this.flushing = this.flush(); }, flushMs);
    this.timer.unref();
  }

  /** Bytes moved for the sandbox (a request began, a chunk went up or down). */
  touch(sandboxId: string): void {
    this.touched.add(sandboxId);
  }

  async flush(): Promise<void> {
    if (this.touched.size === 0) return;
    const sandboxIds = [...this.touched];
    this.touched = new Set();
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
