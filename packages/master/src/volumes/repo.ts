import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { Database } from '../db/schema.ts';
import { isUniqueViolation } from '../templates/store/unique-violation.ts';
import type { VolumeRow } from './tables.ts';

export type VolumeDbRow = Selectable<VolumeRow>;

/** Database access for t_svc_volume. A team id of undefined is the operator, who sees every team's. */
export class VolumeRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** false when the team already has a volume of that name. */
  async insert(row: Insertable<VolumeRow>): Promise<boolean> {
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

  /** The team's volumes, those being deleted too (what maxVolumes counts). */
  async countByTeam(teamId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_volume').select((eb) => eb.fn.countAll<number | string>().as('n')).where('team_id', '=', teamId).executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /** Whether another volume has this token (a plugin's tokens must differ: each opens one volume's content). */
  async tokenTaken(token: string): Promise<boolean> {
    // Compared here too: MySQL's text compares without case (as byId's note says).
    const rows = await this.db.selectFrom('t_svc_volume').select('token').where('token', '=', token).execute();
    return rows.some((r) => r.token === token);
  }

  /**
   * Marks the volume as being deleted, at `at`, unless it is already; false when it was (another
   * DELETE's mark, or a failed one's) or is gone. The conditional update decides between two
   * masters that mark it at once.
   */
  async markDeleting(volumeId: string, at: number): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_volume').set({ deleting_at: at }).where('volume_id', '=', volumeId).where('deleting_at', 'is', null).executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  /** Takes back the mark `at` set (a DELETE refused before anything was destroyed); another's mark stays. */
  async unmarkDeleting(volumeId: string, at: number): Promise<void> {
    await this.db.updateTable('t_svc_volume').set({ deleting_at: null }).where('volume_id', '=', volumeId).where('deleting_at', '=', at).execute();
  }

  /**
   * Claims the volume for an attach under way, until `until` (epoch ms), unless it is marked
   * deleting; false when it is, or is gone. One conditional update, as markDeleting is: of a
   * claim and a mark made at once, the engine orders the two, so a DELETE that marked the volume
   * sees every claim made before its mark, and no claim is made after it. Claims that lapsed
   * (their master died) are forgotten by the next one. `attach_claims` is set before
   * `attach_claims_until`, from the old value: MySQL reads a column assigned earlier in the
   * same UPDATE as its new value, the other engines as its old one.
   */
  async claimAttach(volumeId: string, now: number, until: number): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_volume').set({
      attach_claims: sql`case when attach_claims_until is null or attach_claims_until <= ${now} then 1 else attach_claims + 1 end`,
      attach_claims_until: sql`case when attach_claims_until > ${until} then attach_claims_until else ${until} end`,
    }).where('volume_id', '=', volumeId).where('deleting_at', 'is', null).executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  /** Ends one claim (its node answered, or the attach failed); never below 0. */
  async releaseAttach(volumeId: string): Promise<void> {
    await this.db.updateTable('t_svc_volume').set({ attach_claims: sql`case when attach_claims > 0 then attach_claims - 1 else 0 end` })
      .where('volume_id', '=', volumeId).execute();
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

/** Whether attaches of the volume are under way at `now` (claimAttach): a DELETE must not go on. */
export function attachesUnderWay(row: Pick<VolumeDbRow, 'attach_claims' | 'attach_claims_until'>, now: number): boolean {
  return Number(row.attach_claims) > 0 && row.attach_claims_until !== null && Number(row.attach_claims_until) > now;
}
