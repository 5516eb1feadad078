import type { FastifyInstance } from 'fastify';
import type { CreateSnapshotInput, ForkInput, ListSnapshotsQuery } from '@svc/contracts/master';
import type { SnapshotCatalog } from './catalog.ts';
import type { SnapshotService } from './service.ts';
import { callerTeam } from '../teams/caller.ts';

type IdParams = { Params: { id: string } };

/** Gateway-facing snapshot routes (/v1/...): take, list, delete, fork. */
export function registerSnapshotRoutes(app: FastifyInstance, snapshots: SnapshotService, catalog: SnapshotCatalog): void {
  app.post<IdParams & { Body?: CreateSnapshotInput }>('/v1/sandboxes/:id/snapshots', async (req, reply) => {
    reply.status(201);
    return snapshots.create(req.params.id, req.body ?? {}, callerTeam(req));
  });
  app.post<IdParams & { Body?: ForkInput }>('/v1/sandboxes/:id/fork', async (req, reply) => {
    reply.status(201);
    return snapshots.fork(req.params.id, req.body ?? {});
  });
  app.get<{ Querystring: ListSnapshotsQuery }>('/v1/snapshots', async (req) => catalog.list(req.query, callerTeam(req)));
  app.delete<IdParams>('/v1/snapshots/:id', async (req, reply) => {
    await catalog.delete(req.params.id);
    return reply.status(204).send();
  });
}
