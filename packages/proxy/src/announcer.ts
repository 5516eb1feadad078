import type { Logger, Periodic } from '@svc/common';
import { LifecycleClient, type ProxyAnnouncement } from '@svc/contracts/lifecycle';

/**
 * Tells every lifecycle replica, every few seconds, that this proxy exists and where its admin
 * API is; they record it where the master finds it to purge this proxy's cache after a change.
 * A round that no replica accepts is a failure of the periodic task (counted in the proxy's health).
 */
export class Announcer {
  /** Epoch milliseconds of the last announcement some replica accepted (0: never). */
  lastPushedMs = 0;
  private readonly replicas: LifecycleClient[];

  constructor(lifecycleUrls: string[], clusterToken: string | undefined, private readonly announcement: ProxyAnnouncement, intervalMs: number, periodic: Periodic, private readonly logger: Logger) {
    this.replicas = lifecycleUrls.map((u) => new LifecycleClient(u, { clusterToken }));
    periodic.every('proxy announcement', intervalMs, () => this.announce(), { firstAfterMs: 0 });
  }

  async announce(): Promise<void> {
    if (this.replicas.length === 0) return;
    const results = await Promise.allSettled(this.replicas.map((r) => r.announceProxy(this.announcement)));
    if (results.some((r) => r.status === 'fulfilled')) {
      this.lastPushedMs = Date.now();
      return;
    }
    const reason = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason as Error | undefined;
    this.logger.debug({ replicas: this.replicas.length }, 'announcement refused by every lifecycle replica');
    throw new Error(`no lifecycle replica accepted the proxy announcement: ${reason?.message ?? 'unknown'}`);
  }
}
