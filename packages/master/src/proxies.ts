import type { Coordination, Logger } from '@svc/common';
import { ProxyAdminClient } from '@svc/contracts/proxy-admin';
import { ProxyRegistry } from '@svc/contracts/proxy-registry';
import type { ProxyCachePurger } from './sandboxes/ports.ts';

/**
 * The one way a proxy's cached route is made stale by others (docs/design.md, "Events and
 * caches"): after every state change of a sandbox, the master purges it from the backend cache of
 * every data-plane proxy that announced itself, with its `svcproxy.admin_token`, before it answers.
 */
export class AnnouncedProxyPurger implements ProxyCachePurger {
  private readonly registry: ProxyRegistry;
  private readonly clients = new Map<string, ProxyAdminClient>();

  constructor(coordination: Coordination, private readonly adminToken: string, private readonly logger: Logger) {
    this.registry = new ProxyRegistry(coordination, `master-${process.pid}`, logger);
  }

  /** Best effort, never throws: a proxy that misses a purge finds out when its cached route fails or expires. */
  async purge(sandboxIds: string[]): Promise<void> {
    let proxies;
    try {
      proxies = await this.registry.list();
    } catch (err) {
      this.logger.warn({ sandboxIds, err: (err as Error).message }, 'could not list proxies for a cache purge');
      return;
    }
    await Promise.all(proxies.map(async (p) => {
      try {
        await this.client(p.adminUrl).purge(sandboxIds);
      } catch (err) {
        this.logger.warn({ proxyId: p.proxyId, sandboxIds, err: (err as Error).message }, 'proxy cache purge failed');
      }
    }));
  }

  private client(adminUrl: string): ProxyAdminClient {
    let c = this.clients.get(adminUrl);
    if (!c) {
      c = new ProxyAdminClient(adminUrl, this.adminToken);
      this.clients.set(adminUrl, c);
    }
    return c;
  }
}
