import { SvcError, wrapError, type Logger } from '@svc/common';
import type { SandboxEgressPolicy } from '@svc/contracts/egress';
import { EgressAdminClient } from '@svc/contracts/egress-routes';
import type { NodeRegistry } from './nodes/registry.ts';
import type { EgressPolicies } from './sandboxes/ports.ts';

/** The master's side of the egress proxies: each node's proxy, at the admin URL the node registered. */
export class NodeEgressPolicies implements EgressPolicies {
  private readonly clients = new Map<string, EgressAdminClient>();

  constructor(private readonly nodes: NodeRegistry, private readonly adminToken: string, private readonly logger: Logger) {}

  async available(nodeId: string): Promise<boolean> {
    return (await this.nodes.egressAdminUrl(nodeId)) !== undefined;
  }

  async put(nodeId: string, policy: SandboxEgressPolicy): Promise<void> {
    const client = await this.client(nodeId);
    if (!client) throw new SvcError(400, `network rules need the egress proxy, and node ${nodeId} has none (egress.enabled is false there)`);
    try {
      await client.put(policy);
    } catch (err) {
      const e = err as SvcError;
      // A 400 is the policy's fault and tells the caller which part; anything else is the proxy's.
      if (e.status === 400) throw e;
      throw wrapError(e, `the egress proxy of node ${nodeId} did not take the sandbox's policy`);
    }
  }

  async remove(nodeId: string, sandboxId: string): Promise<void> {
    try {
      await (await this.client(nodeId))?.delete(sandboxId);
    } catch (err) {
      // The proxy reloads every policy from the master when it restarts; a stale entry meanwhile
      // only matters when its address is reused, and the next sandbox there replaces it.
      this.logger.warn({ nodeId, sandboxId, err: (err as Error).message }, 'could not remove a sandbox\'s egress policy');
    }
  }

  private async client(nodeId: string): Promise<EgressAdminClient | undefined> {
    const url = await this.nodes.egressAdminUrl(nodeId);
    if (!url) return undefined;
    let c = this.clients.get(url);
    if (!c) {
      c = new EgressAdminClient(url, this.adminToken);
      this.clients.set(url, c);
    }
    return c;
  }
}
