import type { FastifyInstance } from 'fastify';
import type { Logger } from '@svc/common';
import type { NodeHeartbeat, RegisterNodeResult } from '@svc/contracts/master-internal';
import type { DrainStatus, NodeRecord } from '@svc/contracts/master';
import { parseRegisterNode } from './register-input.ts';
import { HEARTBEAT_INTERVAL_MS, type NodeRegistry } from './registry.ts';

export function registerNodeRoutes(
  app: FastifyInstance, nodes: NodeRegistry, onRegistered: (nodeId: string) => void, logger: Logger,
  onEnded?: (nodeId: string, ended: NonNullable<NodeHeartbeat['ended']>) => void,
): void {
  app.post('/internal/v1/nodes/register', async (req): Promise<RegisterNodeResult> => {
    const reg = parseRegisterNode(req.body);
    await nodes.register(reg);
    logger.info({ nodeId: reg.nodeId, address: reg.address }, 'node registered');
    onRegistered(reg.nodeId);
    return { nodeId: reg.nodeId, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS };
  });
  app.post<{ Params: { id: string }; Body: NodeHeartbeat }>('/internal/v1/nodes/:id/heartbeat', async (req, reply) => {
    await nodes.heartbeat(req.params.id, req.body);
    if (req.body?.ended?.length) onEnded?.(req.params.id, req.body.ended);
    reply.status(204).send();
  });
  app.get('/v1/nodes', async () => nodes.list());
  app.get<{ Params: { id: string } }>('/v1/nodes/:id', async (req) => nodes.get(req.params.id));
  app.post<{ Params: { id: string }; Body: { labels?: unknown } }>('/v1/nodes/:id/labels', async (req) =>
    nodes.addLabels(req.params.id, req.body?.labels));
  app.delete<{ Params: { id: string }; Body: { names?: unknown } }>('/v1/nodes/:id/labels', async (req) =>
    nodes.removeLabels(req.params.id, req.body?.names));
}

/** POST|GET|DELETE /v1/nodes/:id/drain (docs/cluster.md, "Draining a node"). */
export function registerDrainRoutes(app: FastifyInstance, drains: {
  start(nodeId: string): Promise<DrainStatus>;
  status(nodeId: string): Promise<DrainStatus>;
  undrain(nodeId: string): Promise<NodeRecord>;
}): void {
  app.post<{ Params: { id: string } }>('/v1/nodes/:id/drain', async (req, reply) => reply.status(202).send(await drains.start(req.params.id)));
  app.get<{ Params: { id: string } }>('/v1/nodes/:id/drain', async (req) => drains.status(req.params.id));
  app.delete<{ Params: { id: string } }>('/v1/nodes/:id/drain', async (req) => drains.undrain(req.params.id));
}
