import { badRequest, conflict } from '@svc/common';
import type { NetworkConfig, SandboxRecord } from '@svc/contracts/master';
import type { SandboxContext } from './context.ts';
import type { NetworkUpdate } from './create-input.ts';
import { checkEgressProxy, checkPlaceholders, egressPlanOf, pushEgress } from './egress.ts';
import { nodeNetwork, planEgress } from './egress-plan.ts';
import { toRecord } from './record.ts';
import { busyMessage, iamNamesOf, liveRow, rereadRow } from './rows.ts';

/** E2B's updateNetwork: a running sandbox's whole egress configuration, replaced. */
export async function updateNetwork(c: SandboxContext, id: string, u: NetworkUpdate): Promise<SandboxRecord> {
  // An unknown id is a 404 before any lock is named after it (a lock name has a length limit).
  await liveRow(c, id);
  return c.t.locked(id, () => conflict(busyMessage(id, 'retry')), async () => {
    const row = await liveRow(c, id);
    if (row.state !== 'running') throw conflict(`sandbox ${id} is ${row.state}; its network can change only while it runs`);
    const current = JSON.parse(row.network) as NetworkConfig;
    const network: NetworkConfig = { ...current, allowOut: u.allowOut, denyOut: u.denyOut };
    if (u.rules === undefined) delete network.rules; else network.rules = u.rules;
    if (u.egressProxy === undefined) delete network.egressProxy; else network.egressProxy = u.egressProxy;
    const before = egressPlanOf(c, row);
    const plan = planEgress(network, u.allowInternetAccess ?? true);
    if (plan.policy && !(await c.d.egress.available(row.node_id))) {
      throw badRequest(`network rules, host names in allowOut and egressProxy need the egress proxy, and node ${row.node_id} has none`);
    }
    // The policy first: traffic steered by the new rules finds it there.
    await checkPlaceholders(c, network, row.team_id, iamNamesOf(row));
    await checkEgressProxy(c, network);
    await pushEgress(c, row.node_id, id, row.address, plan, row.team_id);
    const node = await c.d.nodes.client(row.node_id);
    await node.updateNetwork(id, {
      allowInternetAccess: u.allowInternetAccess ?? true,
      network: nodeNetwork(u, plan),
    });
    if (before.policy && !plan.policy) await c.d.egress.remove(row.node_id, id);
    await c.d.repo.update(id, {
      network: JSON.stringify(network),
      allow_internet_access: u.allowInternetAccess === undefined ? null : u.allowInternetAccess ? 1 : 0,
    });
    return toRecord(await rereadRow(c, id));
  });
}
