import { conflict, type Logger } from '@svc/common';
import type { NetworkUpdateOnNode, NodeSandbox } from '@svc/contracts/node-agent';
import { normalizePolicy, onlyWidens, samePolicy, type EgressPolicy } from '../network/egress-policy.ts';
import { forgetConnections } from '../network/conntrack.ts';
import type { Firewall } from '../network/firewall.ts';
import type { HostLearner } from '../network/host-learner.ts';
import type { RecordStore } from './record.ts';
import type { SandboxTable } from './sandbox-table.ts';
import { view } from './sandbox-view.ts';

export interface NetworkPolicyDeps {
  logger: Logger;
  firewall: Firewall;
  records: RecordStore;
  /** Addresses of allowOut's host names (absent: host names allow nothing at layer 3). */
  hosts?: HostLearner;
}

/** Sandboxes' egress policies: their firewall chains, and the addresses of the host names they allow. */
export class SandboxNetworkPolicy {
  constructor(private readonly d: NetworkPolicyDeps, private readonly table: SandboxTable) {}

  /** The addresses of the policy's allowOut host names, learned into it. */
  async learnHosts(policy: EgressPolicy): Promise<void> {
    if (this.d.hosts && policy.allowOutHosts?.length) policy.learned = await this.d.hosts.learn(policy.allowOutHosts);
  }

  /** Replaces a running sandbox's egress policy (its firewall chain) with the one given. */
  async update(id: string, update: NetworkUpdateOnNode): Promise<NodeSandbox> {
    const { policy, ignored } = normalizePolicy({ allowInternetAccess: update.allowInternetAccess, ...update.network });
    await this.learnHosts(policy);
    return this.table.locks.run(id, async () => {
      const inst = this.table.find(id);
      if (inst.record.phase !== 'running') throw conflict(`sandbox ${id} is paused; resume it before changing its network`);
      const before = inst.record.policy;
      await this.d.firewall.update(inst.record.instanceId, policy);
      // Connections opened under rules that let more through end (a dependency's channel home,
      // opened while a sandbox installed packages, outlived a lockdown before 2026-11-30).
      if (!before || !onlyWidens(before, policy)) {
        const unforgotten = await forgetConnections(inst.record.address, 'outbound');
        if (unforgotten) this.d.logger.warn({ sandboxId: id, err: unforgotten }, 'network update: the sandbox\'s open connections could not be ended; new ones follow the new rules');
      }
      inst.record.policy = policy;
      await this.d.records.save(inst.record);
      if (ignored.length) this.d.logger.info({ sandboxId: id, ignored }, 'network entries this node cannot enforce at layer 3 were left out');
      return view(inst);
    });
  }

  /** Learns allowOut's host names again; a running sandbox whose addresses changed gets them at once. */
  async relearnHosts(): Promise<void> {
    for (const inst of this.table.all()) {
      if (!inst.record.policy.allowOutHosts?.length || inst.record.phase !== 'running' || !inst.record.sandboxId) continue;
      const next = { ...inst.record.policy };
      await this.learnHosts(next);
      if (samePolicy(next, inst.record.policy)) continue;
      await this.table.locks.run(inst.record.sandboxId, async () => {
        if (inst.record.phase !== 'running') return;
        // New connections follow the new addresses; tracked ones are kept, to an address the name
        // no longer gives too. Names behind round-robin DNS (Cloudflare, ELB) rotate addresses
        // between lookups and a failed lookup gives none for the name, so ending flows to dropped
        // addresses (2026-12-01) cut live SSE streams, websockets and git clones every 60 s, and
        // took DNAT'd flows to the egress proxy with them.
        await this.d.firewall.update(inst.record.instanceId, next);
        inst.record.policy = next;
        await this.d.records.save(inst.record);
      });
    }
  }
}
