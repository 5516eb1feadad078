import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import { TEAM_ROUTES as R } from '@svc/contracts/teams';
import { guardedRoutes } from '../route-guard.ts';
import { callerTeam } from './caller.ts';
import { TEAM_KEY_REFUSALS, type TeamService } from './service.ts';

/** What the operator's team-wide actions need of the sandboxes (E2B's admin routes). */
export interface TeamSandboxAdmin {
  runningByTeam(): Promise<Record<string, number>>;
  killAll(teamId: string): Promise<{ killedCount: number; failedCount: number }>;
}

/** The master's team and key routes: TEAM_ROUTES (contract: packages/contracts/src/teams.ts). */
export function registerTeamRoutes(app: FastifyInstance, teams: TeamService, admin: TeamSandboxAdmin): void {
  const operatorOnly = (req: FastifyRequest) => {
    if (callerTeam(req) !== undefined) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  };
  serve(app, R.runningCounts, async (req) => {
    operatorOnly(req);
    return admin.runningByTeam();
  });
  serve(app, R.killTeamSandboxes, async (req) => {
    operatorOnly(req);
    await teams.getTeam(undefined, req.params.id);
    return admin.killAll(req.params.id);
  });
  // The operator's routes with a body: a team key is refused before the body is looked at.
  const operatorFirst = (refusal: string) => (req: FastifyRequest) => {
    if (callerTeam(req) !== undefined) throw notFound(refusal);
  };
  guardedRoutes(app, operatorFirst(TEAM_KEY_REFUSALS.createTeam), (scope) => serve(scope, R.createTeam, async (req, reply) => {
    const created = await teams.createTeam(callerTeam(req), req.body);
    reply.status(201);
    return created;
  }));
  guardedRoutes(app, operatorFirst(TEAM_KEY_REFUSALS.setLimits), (scope) => serve(scope, R.setLimits, async (req) => (
    teams.setLimits(callerTeam(req), req.params.id, req.body?.limits)
  )));
  serve(app, R.listTeams, async (req) => teams.listTeams(callerTeam(req)));
  serve(app, R.getTeam, async (req) => teams.getTeam(callerTeam(req), req.params.id));
  serve(app, R.createKey, async (req, reply) => {
    const key = await teams.createKey(callerTeam(req), req.params.id, req.body?.name);
    reply.status(201);
    return key;
  });
  serve(app, R.listKeys, async (req) => teams.listKeys(callerTeam(req), req.query.teamId));
  serve(app, R.renameKey, async (req) => teams.renameKey(callerTeam(req), req.params.id, req.body?.name));
  serve(app, R.revokeKey, async (req, reply) => {
    await teams.revokeKey(callerTeam(req), req.params.id);
    return reply.status(204).send();
  });
  serve(app, R.verify, async (req) => teams.verify(req.body.keyHash));
}
