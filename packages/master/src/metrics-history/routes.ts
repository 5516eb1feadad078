import type { FastifyInstance, FastifyRequest } from 'fastify';
import { METRICS_HISTORY_ROUTES as R } from '@svc/contracts/metrics-history';
import { serve } from '@svc/contracts/route-table';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { callerTeam } from '../teams/caller.ts';
import { assertTeamVisible, type MetricsHistory } from './history.ts';

/**
 * The metrics history's routes (METRICS_HISTORY_ROUTES, packages/contracts/src/metrics-history.ts):
 * node agents' reports, and the gateway's reads with the team header.
 */
export function registerMetricsHistoryRoutes(app: FastifyInstance, history: MetricsHistory, teamExists: (teamId: string) => Promise<boolean>): void {
  serve(app, R.report, async (req, reply) => {
    await history.report(req.params.id, req.body.samples);
    return reply.status(204).send();
  });
  serve(app, R.latest, async (req) => history.latest(callerTeam(req) ?? DEFAULT_TEAM_ID, req.query.sandboxIds));
  const visible = async (req: FastifyRequest, teamId: string) => assertTeamVisible(callerTeam(req), teamId, await teamExists(teamId));
  serve(app, R.team, async (req) => {
    await visible(req, req.params.id);
    return history.team(req.params.id, req.query);
  });
  serve(app, R.teamMax, async (req) => {
    await visible(req, req.params.id);
    return history.teamMax(req.params.id, req.query.metric, req.query);
  });
}
