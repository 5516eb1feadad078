import type { Coordination, Logger } from '@svc/common';
import { PROXY_INDEX_KEY, PROXY_KV_PREFIX } from '@svc/lifecycle/api';
import { ProxyAdminClient } from '@svc/proxy/api';
import type { ProxyCachePurger } from './sandboxes/ports.ts';

/**
 * Purges the backend caches of every data-plane proxy that announced itself (the lifecycle
 * manager keeps the list in the coordination store), with the master's `svcproxy.admin_token`.
 */
export class AnnouncedProxyPurger implements ProxyCachePurger {
  constructor(private readonly coordination: Coordination, private readonly adminToken: string, private readonly logger: Logger) {}

  async purge(sandboxIds: string[]): Promise<void> {
    let ids: string[] = [];
    try {
      ids = JSON.parse((await this.coordination.kvGet(PROXY_INDEX_KEY)) ?? '[]');
    } catch { /* no proxies announced */ }
    await Promise.all(ids.map(async (proxyId) => {
      const adminUrl = await this.coordination.kvGet(PROXY_KV_PREFIX + proxyId);
      if (!adminUrl) return;
      try {
        await new ProxyAdminClient(adminUrl, this.adminToken).purge(sandboxIds);
      } catch (err) {
        this.logger.warn({ proxyId, err: (err as Error).message }, 'proxy cache purge failed; the cache entry expires by itself');
      }
    }));
  }
}
