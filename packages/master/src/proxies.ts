import type { Coordination, Logger } from '@svc/common';
import { ProxyRegistry } from '@svc/contracts/proxy-registry';
import type { ProxyCachePurger } from './sandboxes/ports.ts';

/**
 * Purges the backend caches of every data-plane proxy that announced itself (the lifecycle
 * manager keeps them in the coordination store), with the master's `svcproxy.admin_token`.
 */
export class AnnouncedProxyPurger implements ProxyCachePurger {
  private readonly registry: ProxyRegistry;
  constructor(coordination: Coordination, adminToken: string, logger: Logger) {
    this.registry = new ProxyRegistry(coordination, `master-${process.pid}`, adminToken, logger);
  }
  purge(sandboxIds: string[]): Promise<void> {
    return this.registry.purgeEverywhere(sandboxIds);
  }
}
