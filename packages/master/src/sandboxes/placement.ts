import { SvcError, UnreachableError, unavailable, wrapError, type Logger } from '@svc/common';
import type { CreateSandboxOnNode, NodeAgentClient, NodeSandbox } from '@svc/contracts/node-agent';
import type { NodeRegistry, SchedulingNeed } from '../nodes/registry.ts';

/** How many nodes one create asks before it gives up on refusals (each within the create timeout). */
export const MAX_NODES_ASKED = 3;

export interface Placed {
  nodeId: string;
  client: NodeAgentClient;
  node: NodeSandbox;
}

/**
 * Starts a sandbox on a node the registry picks (docs/cluster.md, "Placement"). A node's own
 * admission is the last word (another master may have filled it since its last heartbeat): a
 * node that refuses (503, before it makes anything) is left out and the next one asked, up to
 * three. `body` gives the create for the chosen node (its volumes, its egress) and may refuse
 * it with an error of its own. Any other failure leaves nothing on the node (`discard`).
 */
export async function placeSandbox(
  d: { nodes: NodeRegistry; logger: Logger; discard: (client: NodeAgentClient, nodeId: string, why: string) => void },
  sandboxId: string, need: SchedulingNeed, body: (nodeId: string) => Promise<CreateSandboxOnNode>, timeoutMs: number,
): Promise<Placed> {
  const refusals: Array<{ nodeId: string; message: string }> = [];
  for (;;) {
    const { nodeId, client } = await d.nodes.pick({ ...need, ...(refusals.length ? { exclude: [...(need.exclude ?? []), ...refusals.map((r) => r.nodeId)] } : {}) })
      .catch((err: SvcError) => {
        if (refusals.length && err.status === 503) throw unavailable(`no node can take the sandbox now: ${refusals.map((r) => `node ${r.nodeId}: ${r.message}`).join('; ')}`, 5);
        throw err;
      });
    const create = await body(nodeId);
    try {
      return { nodeId, client, node: await client.createSandbox(create) };
    } catch (err) {
      const e = err as SvcError;
      if (e instanceof SvcError && e.status === 503 && !need.onNode && refusals.length < MAX_NODES_ASKED - 1) {
        // Its public words: the refusals reach the caller, and a node that did not answer is no address of theirs to read.
        refusals.push({ nodeId, message: e instanceof UnreachableError ? e.publicMessage : e.message });
        d.logger.info({ sandboxId, nodeId, reason: e.message }, 'node refused the create; asking another');
        continue;
      }
      // The node may have got further than its answer says; make sure nothing is left there.
      d.discard(client, nodeId, 'create failed on the node');
      if (e.status === 504) throw new SvcError(504, `sandbox create did not finish within create_timeout_insec (${timeoutMs / 1000} s) on node ${nodeId}; the node says: ${e.message}`);
      if (e instanceof SvcError && e.status < 500) throw e;
      throw wrapError(e, `sandbox create failed on node ${nodeId}`, 500);
    }
  }
}
