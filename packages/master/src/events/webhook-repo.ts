import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { DeliveryRow, DeliveryStatus, WebhookRow } from './tables.ts';

export type WebhookDbRow = Selectable<WebhookRow>;
export type DeliveryDbRow = Selectable<DeliveryRow>;

/** Database access for t_svc_webhook (every read scoped to a team) and its delivery queue. */
export class WebhookRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: WebhookRow): Promise<void> {
    await this.db.insertInto('t_svc_webhook').values(row).execute();
  }

  async get(teamId: string, webhookId: string): Promise<WebhookDbRow | undefined> {
    return this.db.selectFrom('t_svc_webhook').selectAll().where('team_id', '=', teamId).where('webhook_id', '=', webhookId).executeTakeFirst();
  }

  async byId(webhookId: string): Promise<WebhookDbRow | undefined> {
    return this.db.selectFrom('t_svc_webhook').selectAll().where('webhook_id', '=', webhookId).executeTakeFirst();
  }

  async list(teamId: string): Promise<WebhookDbRow[]> {
    return this.db.selectFrom('t_svc_webhook').selectAll().where('team_id', '=', teamId).orderBy('created_at', 'asc').orderBy('webhook_id', 'asc').execute();
  }

  async count(teamId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_webhook').select((eb) => eb.fn.countAll<number>().as('n')).where('team_id', '=', teamId).executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /** The team's enabled webhooks: the recorder picks those subscribed to an event's type. */
  async enabledOf(teamId: string): Promise<WebhookDbRow[]> {
    return this.db.selectFrom('t_svc_webhook').selectAll().where('team_id', '=', teamId).where('enabled', '=', 1).execute();
  }

  /** false: the team has no such webhook. */
  async update(teamId: string, webhookId: string, patch: Partial<Pick<WebhookRow, 'name' | 'url' | 'enabled' | 'events' | 'sealed_secret' | 'updated_at'>>): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_webhook').set(patch).where('team_id', '=', teamId).where('webhook_id', '=', webhookId).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Removes the webhook and what it still had to deliver; false: the team has no such webhook. */
  async delete(teamId: string, webhookId: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const gone = await tx.deleteFrom('t_svc_webhook').where('team_id', '=', teamId).where('webhook_id', '=', webhookId).executeTakeFirst();
      if (Number(gone.numDeletedRows) === 0) return false;
      await tx.deleteFrom('t_svc_webhook_delivery').where('webhook_id', '=', webhookId).execute();
      return true;
    });
  }

  async setLastDelivery(webhookId: string, outcome: string): Promise<void> {
    await this.db.updateTable('t_svc_webhook').set({ last_delivery: outcome }).where('webhook_id', '=', webhookId).execute();
  }

  // ---- the delivery queue ----

  /** Deliveries still to be made (pending, retries included) for these webhooks. */
  async waitingOf(webhookIds: string[]): Promise<number> {
    if (webhookIds.length === 0) return 0;
    const row = await this.db.selectFrom('t_svc_webhook_delivery').select((eb) => eb.fn.countAll().as('n'))
      .where('webhook_id', 'in', webhookIds).where('status', '=', 'pending').executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /**
   * Webhooks with deliveries due now that no live master holds, with their team, the one whose
   * oldest due delivery waits longest first; leaving out the webhooks and teams named (at their
   * share on this master). Plain GROUP BY and MIN, which SQLite, PostgreSQL and MySQL all take.
   */
  async dueWebhooks(now: number, skip: { webhooks: string[]; teams: string[] }, limit: number): Promise<Array<{ webhookId: string; teamId: string }>> {
    let q = this.db.selectFrom('t_svc_webhook_delivery as d').innerJoin('t_svc_webhook as w', 'w.webhook_id', 'd.webhook_id')
      .select(['d.webhook_id', 'w.team_id']).select((eb) => eb.fn.min('d.next_at').as('first_at'))
      .where('d.status', '=', 'pending').where('d.next_at', '<=', now).where('d.lease_until', '<', now);
    if (skip.webhooks.length) q = q.where('d.webhook_id', 'not in', skip.webhooks);
    if (skip.teams.length) q = q.where('w.team_id', 'not in', skip.teams);
    const rows = await q.groupBy(['d.webhook_id', 'w.team_id']).orderBy('first_at', 'asc').orderBy('d.webhook_id', 'asc').limit(limit).execute();
    return rows.map((r) => ({ webhookId: r.webhook_id, teamId: r.team_id }));
  }

  /** One webhook's deliveries due now that no live master holds, oldest first. */
  async due(webhookId: string, now: number, limit: number): Promise<DeliveryDbRow[]> {
    return this.db.selectFrom('t_svc_webhook_delivery').selectAll()
      .where('webhook_id', '=', webhookId).where('status', '=', 'pending').where('next_at', '<=', now).where('lease_until', '<', now)
      .orderBy('next_at', 'asc').limit(limit).execute();
  }

  /**
   * Takes a delivery for one attempt, compare-and-set on the row as read (its lease, attempts and
   * due time): of several masters that read it due, one takes it (each event is delivered once),
   * and a row read before another master's attempt settled it is stale and not taken. false:
   * another took it first, or it moved on.
   */
  async claim(d: DeliveryDbRow, holder: string, leaseUntil: number): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_webhook_delivery').set({ lease_holder: holder, lease_until: leaseUntil })
      .where('delivery_id', '=', d.delivery_id).where('status', '=', 'pending').where('lease_until', '=', d.lease_until)
      .where('attempts', '=', d.attempts).where('next_at', '=', d.next_at)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /**
   * Records an attempt's outcome: done (delivered or failed for good), or pending again at nextAt;
   * only under the lease the attempt was claimed with. false: the lease ran out and another
   * master claimed the delivery since, whose outcome is the one kept.
   */
  async settle(deliveryId: string, lease: { holder: string; leaseUntil: number }, s: { status: DeliveryStatus; attempts: number; nextAt: number; error: string | null; now: number }): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_webhook_delivery').set({
      status: s.status, attempts: s.attempts, next_at: s.nextAt, last_error: s.error, lease_until: 0, lease_holder: null,
      done_at: s.status === 'pending' ? null : s.now,
    }).where('delivery_id', '=', deliveryId).where('lease_holder', '=', lease.holder).where('lease_until', '=', lease.leaseUntil).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Removes finished deliveries older than `before` (the queue keeps what is still to send). */
  async pruneDone(before: number): Promise<number> {
    const gone = await this.db.deleteFrom('t_svc_webhook_delivery').where('status', '!=', 'pending').where('done_at', '<', before).executeTakeFirst();
    return Number(gone.numDeletedRows);
  }
}
