import type { Logger } from '@svc/common';
import { LifecycleClient, type ProxyAnnouncement } from '@svc/contracts/lifecycle';

/**
 * Tells every lifecycle replica, every few seconds, that this proxy exists and where its admin
 * API is; they record it where the master finds it to purge this proxy's cache after a change.
 */
export class Announcer {
  /** Epoch milliseconds of the last announcement some replica accepted (0: never). */
  lastPushedMs = 0;
  private readonly replicas: LifecycleClient[];
  private readonly timer: NodeJS.Timeout;
  private failing = false;

  constructor(lifecycleUrls: string[], private readonly announcement: ProxyAnnouncement, intervalMs: number, private readonly logger: Logger) {
    this.replicas = lifecycleUrls.map((u) => new LifecycleClient(u));
    this.timer = setInterval(() => void this.announce(), intervalMs);
    this.timer.unref();
  }

  async announce(): Promise<boolean> {
    const results = await Promise.allSettled(this.replicas.map((r) => r.announceProxy(this.announcement)));
    const ok = results.some((r) => r.status === 'fulfilled');
    if (ok) this.lastPushedMs = Date.now();
    if (!ok && !this.failing && this.replicas.length > 0) {
      const reason = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason as Error | undefined;
      this.logger.warn({ err: reason?.message }, 'no lifecycle replica accepted the proxy announcement');
    }
    this.failing = !ok;
    return ok;
  }

  close() { clearInterval(this.timer); }
}
