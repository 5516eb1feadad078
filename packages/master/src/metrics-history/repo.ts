import type { Kysely, Selectable } from 'kysely';
import type { DbDriver } from '../db/connect.ts';
import type { Database } from '../db/schema.ts';
import type { SandboxMetricRow, TeamMetricRow } from './tables.ts';

export type SandboxMetricDbRow = Selectable<SandboxMetricRow>;
export type TeamMetricDbRow = Selectable<TeamMetricRow>;

/** Rows in one INSERT: far below every engine's limit on bound parameters (SQLite's 32,766). */
const INSERT_CHUNK = 500;

/** Database access for t_svc_sandbox_metric and t_svc_team_metric. */
export class MetricsHistoryRepo {
  constructor(private readonly db: Kysely<Database>, private readonly driver: DbDriver) {}

  /** Stores samples; one already stored for the same sandbox and second (a report sent again) is kept as it was. */
  async insertSamples(rows: SandboxMetricRow[]): Promise<void> {
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
      const chunk = rows.slice(i, i + INSERT_CHUNK);
      const q = this.db.insertInto('t_svc_sandbox_metric').values(chunk);
      await (this.driver === 'mysql' ? q.ignore() : q.onConflict((oc) => oc.columns(['sandbox_id', 'at']).doNothing())).execute();
    }
  }

  /** A sandbox's samples from `from` to `to` (milliseconds, both included), oldest first; past `limit`, the newest. */
  async range(sandboxId: string, from: number, to: number, limit: number): Promise<SandboxMetricDbRow[]> {
    const rows = await this.db.selectFrom('t_svc_sandbox_metric').selectAll()
      .where('sandbox_id', '=', sandboxId).where('at', '>=', from).where('at', '<=', to)
      .orderBy('at', 'desc').limit(limit).execute();
    return rows.reverse();
  }

  /** The newest sample of each of a team's sandboxes named. */
  async latest(teamId: string, sandboxIds: string[]): Promise<SandboxMetricDbRow[]> {
    if (sandboxIds.length === 0) return [];
    const newest = this.db.selectFrom('t_svc_sandbox_metric')
      .select((eb) => ['sandbox_id', eb.fn.max('at').as('max_at')])
      .where('team_id', '=', teamId).where('sandbox_id', 'in', sandboxIds).groupBy('sandbox_id').as('n');
    return this.db.selectFrom('t_svc_sandbox_metric as m').innerJoin(newest, (j) => j.onRef('m.sandbox_id', '=', 'n.sandbox_id').onRef('m.at', '=', 'n.max_at'))
      .selectAll('m').execute();
  }

  /**
   * Removes samples older than `before` of sandboxes that no longer live: a live sandbox keeps
   * its whole series (its life plus the retention, docs/observability.md).
   */
  async prune(before: number): Promise<number> {
    const gone = await this.db.deleteFrom('t_svc_sandbox_metric').where('at', '<', before)
      .where('sandbox_id', 'not in', (eb) => eb.selectFrom('t_svc_sandbox').select('sandbox_id').where('state', '!=', 'terminated'))
      .executeTakeFirst();
    const teams = await this.db.deleteFrom('t_svc_team_metric').where('at', '<', before).executeTakeFirst();
    return Number(gone.numDeletedRows) + Number(teams.numDeletedRows);
  }

  async insertTeamRows(rows: TeamMetricRow[]): Promise<void> {
    if (rows.length === 0) return;
    const q = this.db.insertInto('t_svc_team_metric').values(rows);
    // Two masters that sample the same interval write the same row: the first one stays.
    await (this.driver === 'mysql' ? q.ignore() : q.onConflict((oc) => oc.columns(['team_id', 'at']).doNothing())).execute();
  }

  async teamRange(teamId: string, from: number, to: number, limit: number): Promise<TeamMetricDbRow[]> {
    return this.db.selectFrom('t_svc_team_metric').selectAll()
      .where('team_id', '=', teamId).where('at', '>=', from).where('at', '<=', to)
      .orderBy('at', 'asc').limit(limit).execute();
  }

  /** The interval of the range with the most of the column, the earliest of equals. */
  async teamMax(teamId: string, column: 'concurrent' | 'starts', from: number, to: number): Promise<TeamMetricDbRow | undefined> {
    return this.db.selectFrom('t_svc_team_metric').selectAll()
      .where('team_id', '=', teamId).where('at', '>=', from).where('at', '<=', to)
      .orderBy(column, 'desc').orderBy('at', 'asc').limit(1).executeTakeFirst();
  }
}
