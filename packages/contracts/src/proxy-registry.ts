import type { Coordination, Logger } from '@svc/common';
import { PROXY_INDEX_KEY, PROXY_INDEX_LOCK, PROXY_KV_PREFIX, PROXY_TTL_MS, type ProxyAnnouncement } from './lifecycle.ts';

/**
 * The data-plane proxies that announced themselves, kept in the coordination kv (layout in
 * lifecycle.ts) so every replica and the master see every proxy: the lifecycle records the
 * announcements, the master lists them to purge their caches (docs/design.md, "Events and caches").
 */
export class ProxyRegistry {
  constructor(
    private readonly coord: Coordination,
    private readonly holder: string,
    private readonly logger: Logger,
    private readonly ttlMs = PROXY_TTL_MS,
  ) {}

  /** An announcement as the heartbeat route's schema let it through (LIFECYCLE_ROUTES: the proxyId's and adminUrl's form). */
  async record(a: ProxyAnnouncement): Promise<void> {
    await this.coord.kvSet(PROXY_KV_PREFIX + a.proxyId, a.adminUrl, this.ttlMs);
    const index = await this.readIndex();
    if (!index.includes(a.proxyId)) await this.rewriteIndex((ids) => [...ids, a.proxyId]);
  }

  async list(): Promise<ProxyAnnouncement[]> {
    const ids = await this.readIndex();
    const urls = await Promise.all(ids.map((id) => this.coord.kvGet(PROXY_KV_PREFIX + id)));
    const out: ProxyAnnouncement[] = [];
    ids.forEach((proxyId, i) => { if (urls[i]) out.push({ proxyId, adminUrl: urls[i]! }); });
    return out;
  }

  private async readIndex(): Promise<string[]> {
    const raw = await this.coord.kvGet(PROXY_INDEX_KEY);
    if (!raw) return [];
    try {
      const v = JSON.parse(raw) as unknown;
      return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }

  /** Read-modify-write of the index under its lock, dropping ids whose entry has expired. */
  private async rewriteIndex(change: (ids: string[]) => string[]): Promise<void> {
    for (let attempt = 0; attempt < 20; attempt++) {
      if (await this.coord.tryLock(PROXY_INDEX_LOCK, this.holder, 2_000)) {
        try {
          const ids = change(await this.readIndex());
          const alive = await Promise.all(ids.map((id) => this.coord.kvGet(PROXY_KV_PREFIX + id)));
          const kept = [...new Set(ids.filter((_, i) => alive[i] !== null))];
          await this.coord.kvSet(PROXY_INDEX_KEY, JSON.stringify(kept));
        } finally {
          await this.coord.unlock(PROXY_INDEX_LOCK, this.holder).catch(() => { /* the lock expires with its TTL: a failed unlock only delays the next writer */ });
        }
        return;
      }
      await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
    // The next heartbeat of this proxy tries again.
    this.logger.warn('proxy index busy; announcement recorded without indexing');
  }
}
