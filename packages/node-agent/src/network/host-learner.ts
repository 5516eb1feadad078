import { lookup } from 'node:dns/promises';
import { withDeadline, type Logger } from '@svc/common';

/** A name that takes longer allows nothing this time; the next period tries again. */
const LOOKUP_TIMEOUT_MS = 2_000;

/**
 * The IPv4 addresses of the host names in sandboxes' allowOut, which the firewall allows on any
 * port (docs/egress.md, "E2B's network options": a domain's learned IPs get a /32 any-port allow; its
 * rule ports still go to the egress proxy, which the DNAT before any filtering makes win).
 * Learned again on a period, as addresses change; a name that does not resolve allows nothing.
 * normalizePolicy caps the names per sandbox (EGRESS_DEFAULTS.maxAllowOutHosts), so a create waits at most
 * one lookup timeout here.
 */
export class HostLearner {
  constructor(private readonly overrides: Record<string, string>, private readonly logger: Logger) {}

  /** Sorted /32 CIDRs of every name that resolves. */
  async learn(hosts: string[]): Promise<string[]> {
    const out = new Set<string>();
    const failed: string[] = [];
    await Promise.all(hosts.map(async (host) => {
      const fixed = this.overrides[host];
      if (fixed) { out.add(`${fixed}/32`); return; }
      try {
        const answers = await withDeadline(lookup(host, { all: true, family: 4 }), LOOKUP_TIMEOUT_MS, () => new Error(`no answer within ${LOOKUP_TIMEOUT_MS} ms`));
        for (const a of answers) out.add(`${a.address}/32`);
      } catch (err) {
        failed.push(`${host} (${(err as Error).message})`);
      }
    }));
    if (failed.length) {
      this.logger.warn({ hosts: failed.slice(0, 10), count: failed.length }, 'allowOut host names that do not resolve allow nothing at layer 3 until they do');
    }
    return [...out].sort();
  }
}
