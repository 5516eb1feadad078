import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { DeliveryRow, EventRow } from './tables.ts';

export type EventDbRow = Selectable<EventRow>;

/** A page of events: the team's, or one sandbox's, filtered by type. */
export interface EventQuery {
  sandboxId?: string;
  offset: number;
  limit: number;
  asc: boolean;
  types?: string[];
}

/** The events that start or end a run: the latest of them says which run a new event belongs to. */
const RUN_BOUNDS = ['sandbox.lifecycle.created', 'sandbox.lifecycle.resumed', 'sandbox.lifecycle.paused'];

/** Database access for t_svc_event; every read is scoped to a team. */
export class EventRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** The event and its deliveries, together: a delivery is never queued for an event not kept, nor the other way round. */
  async insert(event: EventRow, deliveries: DeliveryRow[]): Promise<void> {
    if (deliveries.length === 0) {
      await this.db.insertInto('t_svc_event').values(event).execute();
      return;
    }
    await this.db.transaction().execute(async (tx) => {
      await tx.insertInto('t_svc_event').values(event).execute();
      await tx.insertInto('t_svc_webhook_delivery').values(deliveries).execute();
    });
  }

  async list(teamId: string, q: EventQuery): Promise<EventDbRow[]> {
    let s = this.db.selectFrom('t_svc_event').selectAll().where('team_id', '=', teamId);
    if (q.sandboxId !== undefined) s = s.where('sandbox_id', '=', q.sandboxId);
    if (q.types?.length) s = s.where('type', 'in', q.types);
    const order = q.asc ? 'asc' : 'desc';
    return s.orderBy('at', order).orderBy('event_id', order).offset(q.offset).limit(q.limit).execute();
  }

  /** Whether the team has any event of the sandbox (kept for the retention, past the sandbox's own row). */
  async teamHasSandbox(teamId: string, sandboxId: string): Promise<boolean> {
    const row = await this.db.selectFrom('t_svc_event').select('event_id').where('sandbox_id', '=', sandboxId).where('team_id', '=', teamId).limit(1).executeTakeFirst();
    return row !== undefined;
  }

  /** The sandbox's latest create, resume or pause: a new event belongs to its run (none after a pause). */
  async lastRunBound(sandboxId: string): Promise<EventDbRow | undefined> {
    return this.db.selectFrom('t_svc_event').selectAll()
      .where('sandbox_id', '=', sandboxId).where('type', 'in', RUN_BOUNDS)
      .orderBy('at', 'desc').orderBy('event_id', 'desc').limit(1).executeTakeFirst();
  }

  /** Events of a type per team within (from, to] (milliseconds): the team metrics' start counts. */
  async countByTeam(type: string, from: number, to: number): Promise<Record<string, number>> {
    const rows = await this.db.selectFrom('t_svc_event').select((eb) => ['team_id', eb.fn.countAll<number | string>().as('n')])
      .where('type', '=', type).where('at', '>', from).where('at', '<=', to).groupBy('team_id').execute();
    return Object.fromEntries(rows.map((r) => [r.team_id, Number(r.n)]));
  }

  /** Removes events older than `before`; answers how many went. */
  async prune(before: number): Promise<number> {
    const gone = await this.db.deleteFrom('t_svc_event').where('at', '<', before).executeTakeFirst();
    return Number(gone.numDeletedRows);
  }
}
