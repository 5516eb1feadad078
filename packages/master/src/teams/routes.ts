import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest, notFound } from '@svc/common';
import { callerTeam } from './caller.ts';
import type { TeamService } from './service.ts';

type Id = { Params: { id: string } };

/** The master's team and key routes (contract: packages/contracts/src/teams.ts). */
/** What the operator's team-wide actions need of the sandboxes (E2B's admin routes). */
export interface TeamSandboxAdmin {
  runningByTeam(): Promise<Record<string, number>>;
  killAll(teamId: string): Promise<{ killedCount: number; failedCount: number }>;
}

export function registerTeamRoutes(app: FastifyInstance, teams: TeamService, admin: TeamSandboxAdmin): void {
  const operatorOnly = (req: FastifyRequest) => {
    if (callerTeam(req) !== undefined) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  };
  app.get('/v1/admin/running-counts', async (req) => {
    operatorOnly(req);
    return admin.runningByTeam();
  });
  app.post<Id>('/v1/teams/:id/sandboxes/kill', async (req) => {
    operatorOnly(req);
    await teams.getTeam(undefined, req.params.id);
    return admin.killAll(req.params.id);
  });
  app.post('/v1/teams', async (req, reply) => {
    const created = await teams.createTeam(callerTeam(req), req.body);
    reply.status(201);
    return created;
  });
  app.get('/v1/teams', async (req) => teams.listTeams(callerTeam(req)));
  app.get<Id>('/v1/teams/:id', async (req) => teams.getTeam(callerTeam(req), req.params.id));
  app.patch<Id>('/v1/teams/:id', async (req) => teams.setLimits(callerTeam(req), req.params.id, req.body));
  app.post<Id>('/v1/teams/:id/keys', async (req, reply) => {
    const key = await teams.createKey(callerTeam(req), req.params.id, req.body);
    reply.status(201);
    return key;
  });
  app.get<{ Querystring: { teamId?: unknown } }>('/v1/keys', async (req) => {
    const { teamId } = req.query;
    if (teamId !== undefined && typeof teamId !== 'string') throw badRequest('teamId must be given once');
    return teams.listKeys(callerTeam(req), teamId);
  });
  app.patch<Id>('/v1/keys/:id', async (req) => teams.renameKey(callerTeam(req), req.params.id, req.body));
  app.delete<Id>('/v1/keys/:id', async (req, reply) => {
    await teams.revokeKey(callerTeam(req), req.params.id);
    return reply.status(204).send();
  });
  app.post('/internal/v1/keys/verify', async (req) => teams.verify(req.body));
}
