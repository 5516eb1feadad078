import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import { conflict, notFound } from '@svc/common';
import { TemplateStore } from '../templates/store/templates.ts';
import { isUniqueViolation } from '../templates/store/unique-violation.ts';
import type { SnapshotRow } from './tables.ts';

export type SnapshotDbRow = Selectable<SnapshotRow>;

/** Database access for t_svc_snapshot. */
export class SnapshotRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Records a capture whose layer is not in the store yet (status pending, no name yet: the one it asks for is kept apart). */
  async insertPending(row: Omit<SnapshotRow, 'status' | 'name' | 'wanted_name' | 'lease_at'> & { wanted_name?: string | null }): Promise<void> {
    await this.db.insertInto('t_svc_snapshot').values({ ...row, name: null, wanted_name: row.wanted_name ?? null, status: 'pending', lease_at: null }).execute();
  }

  /**
   * The layer is in the store: the snapshot is listed and usable. A name moves to it from the
   * team's own snapshot that had it, never from another team's: that is a 409, and the caller
   * keeps nothing. Names are checked before a capture (service.ts checkName); this is for
   * another team's capture that took the name while this one was copied, which until
   * 2026-11-30 cleared that team's name and took it (its creates by name then started this
   * team's snapshot). Two at once are kept apart by the name's unique index. A row that is
   * gone (a sweep dropped it while its layer was copied) is a 404, and the caller removes the
   * copy it stored: until 2026-12-01 that copy stayed in the store with nothing naming it.
   */
  async markReady(id: string, named: { name: string; teamId: string } | null): Promise<void> {
    const taken = () => conflict(`the snapshot name ${named!.name} was taken by another team while this snapshot was stored: nothing was kept; choose another name`);
    await this.db.transaction().execute(async (tx) => {
      if (named) {
        // Read, then cleared by primary key: an UPDATE by name would take a gap lock on the name's
        // index in InnoDB, and two captures naming a free name at once deadlocked on it.
        const holders = await tx.selectFrom('t_svc_snapshot').select(['snapshot_id', 'team_id']).where('name', '=', named.name).execute();
        if (holders.some((r) => r.team_id !== named.teamId)) throw taken();
        // A template made meanwhile under the name (templates are looked up first, so it would hide this snapshot).
        if (await new TemplateStore(tx).resolve(named.name)) throw conflict(`the snapshot name ${named.name} was taken by a template while this snapshot was stored: nothing was kept; choose another name`);
        if (holders.length) await tx.updateTable('t_svc_snapshot').set({ name: null }).where('snapshot_id', 'in', holders.map((r) => r.snapshot_id)).execute();
      }
      let updated: bigint;
      try {
        // Matched rows, not changed ones, on every engine (mysql2 sets CLIENT_FOUND_ROWS).
        updated = (await tx.updateTable('t_svc_snapshot').set({ status: 'ready', wanted_name: null, ...(named ? { name: named.name } : {}) }).where('snapshot_id', '=', id).executeTakeFirst()).numUpdatedRows;
      } catch (err) {
        if (named && isUniqueViolation(err)) throw taken();
        throw err;
      }
      if (Number(updated) === 0) throw notFound(`snapshot ${id} was dropped while its layer was stored (a sweep took it for abandoned): nothing was kept`);
    });
  }

  /**
   * Renews a pending row's lease while its layer is copied (lease.ts): the sweeps leave a row
   * whose lease is fresh, so one whose copy runs long is left to it. False when the row is gone.
   */
  async renewPending(id: string, now: number): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_snapshot').set({ lease_at: now }).where('snapshot_id', '=', id).where('status', '=', 'pending').executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /**
   * A user's ready snapshot by id, else by name. Exact matches only, as TemplateStore.resolve: the
   * ids keep MySQL's case-insensitive collation (names are utf8mb4_bin since 20261205100000).
   * With `teamId`, only that team's: another team's is as missing as none, in the same query.
   */
  async resolve(ref: string, teamId?: string): Promise<SnapshotDbRow | undefined> {
    let ready = this.db.selectFrom('t_svc_snapshot').selectAll().where('status', '=', 'ready').where('purpose', '=', 'snapshot');
    if (teamId !== undefined) ready = ready.where('team_id', '=', teamId);
    const byId = await ready.where('snapshot_id', '=', ref).executeTakeFirst();
    if (byId?.snapshot_id === ref) return byId;
    const byName = await ready.where('name', '=', ref).executeTakeFirst();
    return byName?.name === ref ? byName : undefined;
  }

  /** A ready snapshot by id, whatever its purpose (a built template's layer). */
  async get(id: string): Promise<SnapshotDbRow | undefined> {
    return this.db.selectFrom('t_svc_snapshot').selectAll().where('snapshot_id', '=', id).where('status', '=', 'ready').executeTakeFirst();
  }

  /** The newest ready build snapshot with this cache key. */
  async byCacheKey(key: string): Promise<SnapshotDbRow | undefined> {
    return this.db.selectFrom('t_svc_snapshot').selectAll().where('cache_key', '=', key).where('purpose', '=', 'build')
      .where('status', '=', 'ready').orderBy('created_at', 'desc').executeTakeFirst();
  }

  /** Captures of these purposes whose layer has not reached the store, taken (or their lease last renewed) before `before`. */
  async pending(purposes: SnapshotDbRow['purpose'][], before: number): Promise<SnapshotDbRow[]> {
    return this.db.selectFrom('t_svc_snapshot').selectAll().where('status', '=', 'pending').where('purpose', 'in', purposes).where(leasedAt, '<', before).execute();
  }

  /** Every row of a purpose (ready or not) made (or its lease last renewed) before `before`. */
  async byPurpose(purpose: SnapshotDbRow['purpose'], before: number): Promise<SnapshotDbRow[]> {
    return this.db.selectFrom('t_svc_snapshot').selectAll().where('purpose', '=', purpose).where(leasedAt, '<', before).execute();
  }

  /** Deletes the row; with `teamId`, only if it is that team's. False when nothing was deleted. */
  async delete(id: string, teamId?: string): Promise<boolean> {
    let q = this.db.deleteFrom('t_svc_snapshot').where('snapshot_id', '=', id);
    if (teamId !== undefined) q = q.where('team_id', '=', teamId);
    return Number((await q.executeTakeFirst()).numDeletedRows) > 0;
  }

  /** Newest first, keyset-paginated on (created_at, snapshot_id). */
  async list(opts: { sandboxId?: string; ref?: string; after?: { createdAt: number; id: string }; limit: number; teamId?: string }): Promise<SnapshotDbRow[]> {
    let q = this.db.selectFrom('t_svc_snapshot').selectAll().where('status', '=', 'ready').where('purpose', '=', 'snapshot');
    if (opts.teamId !== undefined) q = q.where('team_id', '=', opts.teamId);
    if (opts.sandboxId) q = q.where('sandbox_id', '=', opts.sandboxId);
    if (opts.ref) {
      const ref = opts.ref;
      q = q.where((eb) => eb.or([eb('snapshot_id', '=', ref), eb('name', '=', ref)]));
    }
    if (opts.after) {
      const { createdAt, id } = opts.after;
      q = q.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('snapshot_id', '<', id)])]));
    }
    const rows = await q.orderBy('created_at', 'desc').orderBy('snapshot_id', 'desc').limit(opts.limit).execute();
    // A case variant of an id matches under MySQL's collation; a ref names one id and one name at most, so the page stays whole.
    return opts.ref ? rows.filter((r) => r.snapshot_id === opts.ref || r.name === opts.ref) : rows;
  }

  /**
   * The team's own snapshots, pending ones too (what maxSnapshots counts); with `before`, only
   * those taken before that one (by created_at, then id), so that of captures recorded together
   * the oldest keep their places.
   */
  async teamCount(teamId: string, before?: { createdAt: number; id: string }): Promise<number> {
    let q = this.db.selectFrom('t_svc_snapshot').select((eb) => eb.fn.countAll<number | string>().as('n')).where('team_id', '=', teamId).where('purpose', '=', 'snapshot');
    if (before) {
      const { createdAt, id } = before;
      q = q.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('snapshot_id', '<', id)])]));
    }
    return Number((await q.executeTakeFirst())?.n ?? 0);
  }

  /** Every snapshot's layer, pending ones too. */
  async layerIds(): Promise<Set<string>> {
    return new Set((await this.db.selectFrom('t_svc_snapshot').select('layer_id').execute()).map((r) => r.layer_id));
  }
}

/** When a live master last vouched for a row: its lease's last renewal, else its creation (lease.ts). */
const leasedAt = sql<number>`coalesce(lease_at, created_at)`;
