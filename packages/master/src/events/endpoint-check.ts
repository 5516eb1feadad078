import { lookup } from 'node:dns/promises';
import { parseEgressResolve, platformNetworksOf, type SvcConfig } from '@svc/common';
import type { NodeRegistry } from '../nodes/registry.ts';
import { platformEndpoints } from './platform-endpoints.ts';
import { WebhookTargets } from './webhook-target.ts';

/**
 * The check of an address the egress proxy will dial for a user (a sandbox's SOCKS5
 * egressProxy): not the platform's own endpoints, not a sandbox pool. Names resolve as the
 * egress proxy resolves them, egress.resolve's overrides first, so both see the same address.
 */
export function platformEndpointCheck(cfg: SvcConfig, nodes: NodeRegistry): WebhookTargets {
  const overrides = parseEgressResolve(cfg.egress.resolve);
  return new WebhookTargets({
    platform: platformEndpoints(cfg, async () => (await nodes.list()).map((n) => n.address)),
    pools: [cfg.node_agent.address_pool],
    networks: platformNetworksOf(cfg),
    allowCidrs: [],
    resolve: async (host) => {
      const o = overrides[host.toLowerCase()];
      return o ? [o] : (await lookup(host, { all: true })).map((a) => a.address);
    },
  });
}
