import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MetricsHistoryClient, type TeamMetricName } from '@svc/contracts/metrics-history';
import { documentedRoute } from '@svc/contracts/route-schemas';
import { toE2bMetric } from './e2b-shapes.ts';
import { identityOf, teamHeaders } from './request-identity.ts';
import type { MasterAddress } from './master-address.ts';

type Range = { start?: number; end?: number };
const iso = (unix: number) => new Date(unix * 1000).toISOString();

/**
 * E2B's metric routes beside the per-sandbox series (routes.ts): the newest sample of several
 * sandboxes and a team's intervals, from the master's metrics history (docs/observability.md).
 * A team key reads its own team only; another team's id is a 404.
 */
export function registerMetricRoutes(app: FastifyInstance, master: MasterAddress): void {
  // The admin key reads as the operator (every team), a team key as its team, as team-routes.ts does.
  const history = (req: FastifyRequest) => new MetricsHistoryClient(master.url, { headers: { ...master.headers, ...(identityOf(req)?.admin ? {} : teamHeaders(req)) } });

  app.route({
    ...documentedRoute('GET', '/sandboxes/metrics'),
    handler: async (req: FastifyRequest<{ Querystring: { sandbox_ids: string[] } }>) => {
      const latest = await history(req).latest(req.query.sandbox_ids);
      return { sandboxes: Object.fromEntries(Object.entries(latest.sandboxes).map(([id, m]) => [id, toE2bMetric(m)])) };
    },
  });
  app.route({
    ...documentedRoute('GET', '/teams/{teamID}/metrics'),
    handler: async (req: FastifyRequest<{ Params: { teamID: string }; Querystring: Range }>) =>
      (await history(req).team(req.params.teamID, req.query)).map((m) => ({ timestamp: iso(m.timestampUnix), ...m })),
  });
  app.route({
    ...documentedRoute('GET', '/teams/{teamID}/metrics/max'),
    handler: async (req: FastifyRequest<{ Params: { teamID: string }; Querystring: Range & { metric: TeamMetricName } }>) => {
      const { metric, ...range } = req.query;
      const max = await history(req).teamMax(req.params.teamID, metric, range);
      return { timestamp: iso(max.timestampUnix), ...max };
    },
  });
}
