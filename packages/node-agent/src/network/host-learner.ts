import { lookup } from 'node:dns/promises';
import type { Logger } from '@svc/common';

/**
 * The IPv4 addresses of the host names in sandboxes' allowOut, which the firewall allows on any
 * port (SPEC.md "Egress proxy behaviour" 5: a domain's learned IPs get a /32 any-port allow; its
 * rule ports still go to the egress proxy, which the DNAT before any filtering makes win).
 * Learned again on a period, as addresses change; a name that does not resolve allows nothing.
 */
export class HostLearner {
  constructor(private readonly overrides: Record<string, string>, private readonly logger: Logger) {}

  /** Sorted /32 CIDRs of every name that resolves. */
  async learn(hosts: string[]): Promise<string[]> {
    const out = new Set<string>();
    await Promise.all(hosts.map(async (host) => {
      const fixed = this.overrides[host];
      if (fixed) { out.add(`${fixed}/32`); return; }
      try {
        for (const a of await lookup(host, { all: true, family: 4 })) out.add(`${a.address}/32`);
      } catch (err) {
        this.logger.warn({ host, err: (err as Error).message }, 'an allowOut host name does not resolve; it allows nothing at layer 3 until it does');
      }
    }));
    return [...out].sort();
  }
}
