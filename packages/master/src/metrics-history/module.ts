import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Logger } from '@svc/common';
import type { DbDriver } from '../db/connect.ts';
import type { Database } from '../db/schema.ts';
import { MetricsHistory, type TeamCounts } from './history.ts';
import { MetricsHistoryRepo } from './repo.ts';
import { registerMetricsHistoryRoutes } from './routes.ts';

export interface MetricsHistoryModule {
  history: MetricsHistory;
  registerRoutes(app: FastifyInstance, teamExists: (teamId: string) => Promise<boolean>): void;
}

/** The metrics history (docs/observability.md): its store, its reads and the team sampler's writes. */
export function metricsHistory(d: { db: Kysely<Database>; driver: DbDriver; counts: TeamCounts; logger: Logger }): MetricsHistoryModule {
  const history = new MetricsHistory({ repo: new MetricsHistoryRepo(d.db, d.driver), db: d.db, counts: d.counts, logger: d.logger });
  return { history, registerRoutes: (app, teamExists) => registerMetricsHistoryRoutes(app, history, teamExists) };
}
