import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, SandboxRow } from '../db/schema.ts';
import type { SandboxState } from '@svc/contracts/master-internal';
import type { DbDriver } from '../db/connect.ts';

export type Row = Selectable<SandboxRow>;
/** The columns a write may set beside the state; the state itself moves only through transitions.ts. */
export type SandboxPatch = Partial<Omit<SandboxRow, 'state' | 'sandbox_id'>> & { state?: never };

/** Database access for t_svc_sandbox. State moves are compare-and-set on the current state. */
export class SandboxRepo {
  constructor(private readonly db: Kysely<Database>, private readonly driver: DbDriver) {}

  /** Only transitions.ts records a sandbox (its state is the table's first). */
  async insert(row: SandboxRow): Promise<void> {
    await this.db.insertInto('t_svc_sandbox').values(row).execute();
  }

  async get(id: string): Promise<Row | undefined> {
    return this.db.selectFrom('t_svc_sandbox').selectAll().where('sandbox_id', '=', id).executeTakeFirst();
  }

  /**
   * Moves the row into `to` when it is still in one of `from`; answers whether it did. Only
   * transitions.ts calls it, after checking the move against the state table.
   */
  async writeState(id: string, from: SandboxState[], to: SandboxState, patch: SandboxPatch): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_sandbox')
      .set({ ...patch, state: to, updated_at: Date.now() })
      .where('sandbox_id', '=', id)
      .where('state', 'in', from)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Writes columns other than the state while the row is in one of `states`; answers whether it did. */
  async updateIn(id: string, states: SandboxState[], patch: SandboxPatch): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_sandbox')
      .set({ ...patch, updated_at: Date.now() })
      .where('sandbox_id', '=', id)
      .where('state', 'in', states)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Writes columns other than the state (a deadline, the network). */
  async update(id: string, patch: SandboxPatch): Promise<void> {
    await this.db.updateTable('t_svc_sandbox').set({ ...patch, updated_at: Date.now() }).where('sandbox_id', '=', id).execute();
  }

  /** Live sandboxes, newest first, keyset-paginated on (started_at, sandbox_id). */
  async list(opts: {
    states: SandboxState[]; templateIds?: string[]; after?: { startedAt: number; id: string }; limit: number;
    order?: 'asc' | 'desc'; startedAfter?: number; startedBefore?: number; teamId?: string;
  }): Promise<Row[]> {
    const order = opts.order ?? 'desc';
    const past = order === 'desc' ? '<' : '>';
    let q = this.db.selectFrom('t_svc_sandbox').selectAll().where('state', 'in', opts.states);
    if (opts.templateIds) q = q.where('template_id', 'in', opts.templateIds);
    if (opts.teamId !== undefined) q = q.where('team_id', '=', opts.teamId);
    if (opts.startedAfter !== undefined) q = q.where('started_at', '>=', opts.startedAfter);
    if (opts.startedBefore !== undefined) q = q.where('started_at', '<=', opts.startedBefore);
    if (opts.after) {
      const { startedAt, id } = opts.after;
      q = q.where((eb) => eb.or([
        eb('started_at', past, startedAt),
        eb.and([eb('started_at', '=', startedAt), eb('sandbox_id', past, id)]),
      ]));
    }
    return q.orderBy('started_at', order).orderBy('sandbox_id', order).limit(opts.limit).execute();
  }

  /** envd access tokens of the sandboxes that are not terminated (signed file URLs name none). */
  async envdTokens(): Promise<Array<{ sandboxId: string; token: string }>> {
    const rows = await this.db.selectFrom('t_svc_sandbox').select(['sandbox_id', 'envd_access_token'])
      .where('state', 'in', ['running', 'paused', 'pausing', 'resuming']).where('envd_access_token', 'is not', null).execute();
    return rows.map((r) => ({ sandboxId: r.sandbox_id, token: r.envd_access_token! }));
  }

  async countRunning(teamId?: string): Promise<number> {
    let q = this.db.selectFrom('t_svc_sandbox').select((eb) => eb.fn.countAll<number | string>().as('n')).where('state', '=', 'running');
    if (teamId !== undefined) q = q.where('team_id', '=', teamId);
    const r = await q.executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /**
   * What the team's quotas count (quota.ts): its sandboxes that hold resources (running, or on
   * their way in or out) and their sizes, and every sandbox it keeps. A running sandbox being
   * killed counts (pause_kind is set only while paused): a kill its node does not finish in time
   * puts it back to running, with no admission.
   */
  async teamUsage(teamId: string): Promise<{ sandboxes: number; memoryMB: number; vcpus: number; kept: number }> {
    const rows = await this.db.selectFrom('t_svc_sandbox')
      .select((eb) => ['state', 'pause_kind', eb.fn.countAll<number | string>().as('n'), eb.fn.sum<number | string | null>('memory_mb').as('mem'), eb.fn.sum<number | string | null>('cpu_count').as('cpu')])
      .where('team_id', '=', teamId).where('state', '!=', 'terminated').groupBy(['state', 'pause_kind']).execute();
    const usage = { sandboxes: 0, memoryMB: 0, vcpus: 0, kept: 0 };
    for (const r of rows) {
      usage.kept += Number(r.n);
      const killingRunning = r.state === 'killing' && r.pause_kind === null;
      if (r.state !== 'running' && r.state !== 'pausing' && r.state !== 'resuming' && !killingRunning) continue;
      usage.sandboxes += Number(r.n);
      usage.memoryMB += Number(r.mem ?? 0);
      usage.vcpus += Number(r.cpu ?? 0);
    }
    return usage;
  }

  /** Running sandboxes per team (E2B's admin running-counts). */
  async runningByTeam(): Promise<Record<string, number>> {
    const rows = await this.db.selectFrom('t_svc_sandbox').select((eb) => ['team_id', eb.fn.countAll<number | string>().as('n')])
      .where('state', '=', 'running').groupBy('team_id').execute();
    return Object.fromEntries(rows.map((r) => [r.team_id, Number(r.n)]));
  }

  /** Sandboxes that are not terminated, counted by state, template and runtime (the metric svc_sandboxes). */
  async liveCounts(): Promise<Array<{ state: string; templateId: string; runtime: string; count: number }>> {
    const rows = await this.db.selectFrom('t_svc_sandbox')
      .select((eb) => ['state', 'template_id', 'runtime', eb.fn.countAll<number | string>().as('n')])
      .where('state', '!=', 'terminated').groupBy(['state', 'template_id', 'runtime']).execute();
    return rows.map((r) => ({ state: r.state, templateId: r.template_id, runtime: r.runtime, count: Number(r.n) }));
  }

  async listByNode(nodeId: string): Promise<Row[]> {
    return this.db.selectFrom('t_svc_sandbox').selectAll().where('node_id', '=', nodeId).where('state', '!=', 'terminated').execute();
  }

  /** Running sandboxes, and paused ones that are to be killed, whose idle deadline has passed. */
  async due(now: number): Promise<Row[]> {
    return this.db.selectFrom('t_svc_sandbox').selectAll()
      .where('end_at', 'is not', null)
      .where('end_at', '<=', now)
      .where((eb) => eb.or([
        eb('state', '=', 'running'),
        eb.and([eb('state', '=', 'paused'), eb('on_timeout', '=', 'kill')]),
      ]))
      .orderBy('end_at')
      .limit(500)
      .execute();
  }

  /** Resets the idle clock of running sandboxes: end_at = max(end_at, now + timeout). */
  async touch(ids: string[], now: number): Promise<void> {
    if (ids.length === 0) return;
    // PostgreSQL types `$1 + integer` and `integer * 1000` as integer: epoch milliseconds overflow
    // it, and so did a timeout past 24.8 days, which failed the whole batch, every team's
    // sandboxes behind that proxy, for as long as that sandbox ran (found by a helper reading the
    // master as an attacker).
    const big = this.driver === 'mysql' ? sql`signed` : sql`bigint`;
    const next = sql<number>`(cast(${now} as ${big}) + cast(timeout_sec as ${big}) * 1000)`;
    await this.db.updateTable('t_svc_sandbox')
      .set({ end_at: sql`case when end_at < ${next} then ${next} else end_at end` })
      .where('sandbox_id', 'in', ids)
      .where('state', '=', 'running')
      .where('timeout_sec', '>', 0)
      .where('end_at', 'is not', null)
      .execute();
  }

  /** Rows left in a transient state (a crash mid-operation), for reconciliation. */
  async stuck(olderThan: number): Promise<Row[]> {
    return this.db.selectFrom('t_svc_sandbox').selectAll()
      .where('state', 'in', ['pausing', 'resuming', 'killing'])
      .where('updated_at', '<', olderThan)
      .execute();
  }

  /** Forgets terminated sandboxes after a while; until then they answer 410. */
  async purgeTerminated(before: number): Promise<number> {
    const r = await this.db.deleteFrom('t_svc_sandbox').where('state', '=', 'terminated').where('terminated_at', '<', before).executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
