import type { FastifyInstance } from 'fastify';
import { badRequest, type Logger } from '@svc/common';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import type { ListSandboxesQuery } from '@svc/contracts/master';
import { parseSandboxLogsQuery } from '@svc/contracts/sandbox-logs';
import type { LifecycleReason } from '@svc/contracts/master-internal';
import type { MasterSandboxes } from './service.ts';
import { checkCreateInput } from './create-input.ts';
import { callerTeam } from '../teams/caller.ts';

type IdParams = { Params: { id: string } };

/** Gateway-facing sandbox routes (/v1/...) and the internal ones (/internal/v1/...). */
export function registerSandboxRoutes(app: FastifyInstance, svc: MasterSandboxes, logger: Logger, egressAdminToken = ''): void {
  // The egress proxy loads its node's policies here at start; they hold the inject secrets.
  app.get<{ Querystring: { nodeId?: string } }>('/internal/v1/egress/policies', async (req) => {
    requireEgressAdmin(req, egressAdminToken, 'load policies');
    if (!req.query.nodeId) throw badRequest('nodeId is required');
    return svc.egressPolicies(req.query.nodeId);
  });
  app.post<{ Body: unknown }>('/v1/sandboxes', async (req, reply) => {
    const input = checkCreateInput(req.body);
    reply.status(201);
    return svc.create(input, undefined, callerTeam(req));
  });
  app.get<{ Querystring: ListSandboxesQuery }>('/v1/sandboxes', async (req) => svc.list(req.query, callerTeam(req)));
  app.get<IdParams>('/v1/sandboxes/:id', async (req) => svc.get(req.params.id));
  app.delete<IdParams>('/v1/sandboxes/:id', async (req, reply) => {
    await svc.kill(req.params.id, 'killed');
    reply.status(204).send();
  });
  app.post<IdParams & { Body?: { memory?: unknown } }>('/v1/sandboxes/:id/pause', async (req) => svc.pause(req.params.id, 'api', memoryOpt(req.body)));
  app.put<IdParams & { Body: unknown }>('/v1/sandboxes/:id/network', async (req) => svc.updateNetwork(req.params.id, req.body));
  app.post<IdParams & { Body: { timeout?: number; memory?: unknown } }>('/v1/sandboxes/:id/connect', async (req) => svc.connect(req.params.id, req.body?.timeout, memoryOpt(req.body)));
  app.post<IdParams & { Body: { timeout?: number; memory?: unknown } }>('/v1/sandboxes/:id/resume', async (req) => svc.resume(req.params.id, req.body?.timeout, memoryOpt(req.body)));
  app.post<IdParams & { Body: { timeout?: number } }>('/v1/sandboxes/:id/timeout', async (req) => svc.setTimeout(req.params.id, req.body?.timeout));
  app.post<IdParams & { Body: { duration?: number } }>('/v1/sandboxes/:id/refresh', async (req) => svc.refresh(req.params.id, req.body?.duration));
  app.get<IdParams & { Querystring: { start?: unknown; end?: unknown } }>('/v1/sandboxes/:id/metrics', async (req) => svc.metrics(req.params.id, req.query));
  app.get<IdParams & { Querystring: Record<string, unknown> }>('/v1/sandboxes/:id/logs', async (req) => svc.logs(req.params.id, parseSandboxLogsQuery(req.query)));

  app.get<IdParams>('/internal/v1/sandboxes/:id/route', async (req) => svc.route(req.params.id));
  app.post<{ Body: unknown }>('/internal/v1/file-urls/route', async (req) => svc.routeBySignature(req.body));
  app.post<{ Body: { sandboxIds: unknown } }>('/internal/v1/activity', async (req, reply) => {
    await svc.activity(req.body?.sandboxIds);
    reply.status(204).send();
  });
  app.get('/internal/v1/lifecycle/due', async () => svc.due());
  app.post<IdParams & { Body: { reason?: LifecycleReason } }>('/internal/v1/sandboxes/:id/pause', async (req) => {
    await svc.pause(req.params.id, req.body?.reason ?? 'timeout');
    return svc.route(req.params.id);
  });
  app.post<IdParams & { Body: { reason?: LifecycleReason } }>('/internal/v1/sandboxes/:id/resume', async (req) =>
    svc.resumeForTraffic(req.params.id, req.body?.reason ?? 'auto'));
  app.post<IdParams & { Body: { reason?: LifecycleReason } }>('/internal/v1/sandboxes/:id/kill', async (req, reply) => {
    await svc.kill(req.params.id, req.body?.reason === 'timeout' ? 'timeout' : 'killed');
    reply.status(204).send();
  });
  void logger;
}

/** `memory` of a pause, connect or resume body: false asks for the files alone. */
function memoryOpt(body: { memory?: unknown } | undefined): { memory?: boolean } {
  const m = body?.memory;
  if (m === undefined || m === null) return {};
  if (typeof m !== 'boolean') throw badRequest('memory must be a boolean');
  return { memory: m };
}
