import type { FastifyInstance } from 'fastify';
import { MASTER_ROUTES as R } from '@svc/contracts/master';
import { serve } from '@svc/contracts/route-table';
import type { SnapshotCatalog } from './catalog.ts';
import type { SnapshotService } from './service.ts';
import { callerTeam } from '../teams/caller.ts';

/** Gateway-facing snapshot routes (/v1/...): take, list, delete, fork. */
export function registerSnapshotRoutes(app: FastifyInstance, snapshots: SnapshotService, catalog: SnapshotCatalog): void {
  serve(app, R.createSnapshot, async (req, reply) => {
    reply.status(201);
    return snapshots.create(req.params.id, { ...(req.body.name ? { name: req.body.name } : {}) }, callerTeam(req));
  });
  serve(app, R.forkSandbox, async (req, reply) => {
    reply.status(201);
    return snapshots.fork(req.params.id, req.body);
  });
  serve(app, R.listSnapshots, async (req) => catalog.list(req.query, callerTeam(req)));
  serve(app, R.deleteSnapshot, async (req, reply) => {
    await catalog.delete(req.params.id, callerTeam(req));
    return reply.status(204).send();
  });
}
