import type { Periodic } from '@svc/common';
import type { MasterInternalClient } from '@svc/contracts/master-internal';

/**
 * Collects which sandboxes saw traffic and reports them to the master about once a second, in
 * one call. Traffic is bytes that reached a process in the sandbox: an answer it sent (a response
 * head, a chunk, a frame) and every chunk sent to it over a connection it accepted. An answer the
 * proxy gives by itself (502 for a refused connection, 403, 401, 404, 410) is not. A stream or WebSocket that stays open but silent is idle (docs/data-plane.md,
 * "Activity"), so a sandbox whose client keeps a quiet connection open still times out. A report
 * that fails is a failure of the periodic task (logged once an outage, counted in the health).
 */
export class ActivityTracker {
  private touched = new Set<string>();

  constructor(private readonly master: MasterInternalClient, flushMs: number, periodic: Periodic) {
    periodic.every('activity report', flushMs, () => this.flush());
  }

  /** Bytes moved between a client and a process in the sandbox (an answer began, a chunk went up or down). */
  touch(sandboxId: string): void {
    this.touched.add(sandboxId);
  }

  async flush(): Promise<void> {
    if (this.touched.size === 0) return;
    const sandboxIds = [...this.touched];
    this.touched = new Set();
    try {
      await this.master.reportActivity({ sandboxIds });
    } catch (err) {
      // Kept for the next flush: a missed report would let a busy sandbox be paused.
      for (const id of sandboxIds) this.touched.add(id);
      throw err;
    }
  }
}
