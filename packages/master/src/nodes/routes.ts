import type { FastifyInstance } from 'fastify';
import type { Logger } from '@svc/common';
import { MASTER_INTERNAL_ROUTES as I, type NodeHeartbeat } from '@svc/contracts/master-internal';
import { MASTER_ROUTES as R, type DrainStatus, type NodeRecord } from '@svc/contracts/master';
import { serve } from '@svc/contracts/route-table';
import { parseRegisterNode } from './register-input.ts';
import { HEARTBEAT_INTERVAL_MS, type NodeRegistry } from './registry.ts';

export function registerNodeRoutes(
  app: FastifyInstance, nodes: NodeRegistry, onRegistered: (nodeId: string) => void, logger: Logger,
  onEnded?: (nodeId: string, ended: NonNullable<NodeHeartbeat['ended']>) => void,
): void {
  // Checked by hand (register-input.ts): a URL that parses, the runtimes' order, label rules.
  serve(app, I.registerNode, async (req) => {
    const reg = parseRegisterNode(req.body);
    await nodes.register(reg);
    logger.info({ nodeId: reg.nodeId, address: reg.address }, 'node registered');
    onRegistered(reg.nodeId);
    return { nodeId: reg.nodeId, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS };
  });
  serve(app, I.heartbeat, async (req, reply) => {
    await nodes.heartbeat(req.params.id, req.body);
    if (req.body.ended?.length) onEnded?.(req.params.id, req.body.ended);
    return reply.status(204).send();
  });
  serve(app, R.listNodes, async () => nodes.list());
  serve(app, R.getNode, async (req) => nodes.get(req.params.id));
  // Labels are checked by the registry with the node agent's own rules (node-labels.ts).
  serve(app, R.addNodeLabels, async (req) => nodes.addLabels(req.params.id, (req.body as { labels?: unknown } | undefined)?.labels));
  serve(app, R.removeNodeLabels, async (req) => nodes.removeLabels(req.params.id, (req.body as { names?: unknown } | undefined)?.names));
}

/** POST|GET|DELETE /v1/nodes/:id/drain (docs/cluster.md, "Draining a node"). */
export function registerDrainRoutes(app: FastifyInstance, drains: {
  start(nodeId: string): Promise<DrainStatus>;
  status(nodeId: string): Promise<DrainStatus>;
  undrain(nodeId: string): Promise<NodeRecord>;
}): void {
  serve(app, R.drainNode, async (req, reply) => reply.status(202).send(await drains.start(req.params.id)));
  serve(app, R.drainStatus, async (req) => drains.status(req.params.id));
  serve(app, R.undrainNode, async (req) => drains.undrain(req.params.id));
}
