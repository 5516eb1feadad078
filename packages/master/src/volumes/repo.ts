import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import { isUniqueViolation } from '../templates/store/unique-violation.ts';
import type { VolumeRow } from './tables.ts';

export type VolumeDbRow = Selectable<VolumeRow>;

/** Database access for t_svc_volume. A team id of undefined is the operator, who sees every team's. */
export class VolumeRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** false when the team already has a volume of that name. */
  async insert(row: VolumeRow): Promise<boolean> {
    try {
      await this.db.insertInto('t_svc_volume').values(row).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Exact matches only, as byName: ids keep MySQL's case-insensitive collation. */
  async byId(volumeId: string, teamId?: string): Promise<VolumeDbRow | undefined> {
    let q = this.db.selectFrom('t_svc_volume').selectAll().where('volume_id', '=', volumeId);
    if (teamId !== undefined) q = q.where('team_id', '=', teamId);
    const row = await q.executeTakeFirst();
    return row?.volume_id === volumeId ? row : undefined;
  }

  /**
   * Exact: names are utf8mb4_bin on MySQL since 20261205100000 (before, `data` found `Data`);
   * checked here too, as TemplateStore.resolve checks aliases.
   */
  async byName(teamId: string, name: string): Promise<VolumeDbRow | undefined> {
    const row = await this.db.selectFrom('t_svc_volume').selectAll().where('team_id', '=', teamId).where('name', '=', name).executeTakeFirst();
    return row?.name === name ? row : undefined;
  }

  async list(teamId?: string): Promise<VolumeDbRow[]> {
    let q = this.db.selectFrom('t_svc_volume').selectAll().orderBy('created_at').orderBy('volume_id');
    if (teamId !== undefined) q = q.where('team_id', '=', teamId);
    return q.execute();
  }

  /** Deletes the record only while no node holds the volume; false when one does (or it is gone). */
  async deleteUnmounted(volumeId: string): Promise<boolean> {
    const r = await this.db.deleteFrom('t_svc_volume').where('volume_id', '=', volumeId).where('refcount', '<=', 0).executeTakeFirst();
    return Number(r.numDeletedRows) === 1;
  }

  /** Moves the count by a node's flip, never below 0 (a flip that repeats after a lost answer). */
  async addRefcount(volumeId: string, delta: number): Promise<void> {
    const q = this.db.updateTable('t_svc_volume').where('volume_id', '=', volumeId);
    if (delta >= 0) await q.set({ refcount: sql`refcount + ${delta}` }).execute();
    else await q.set({ refcount: sql`case when refcount + ${delta} < 0 then 0 else refcount + ${delta} end` }).execute();
  }

  async setRefcount(volumeId: string, refcount: number): Promise<void> {
    await this.db.updateTable('t_svc_volume').set({ refcount }).where('volume_id', '=', volumeId).execute();
  }
}
