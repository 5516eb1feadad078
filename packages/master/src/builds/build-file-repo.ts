import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { BuildFileRow } from './tables.ts';

/** Database access for t_svc_build_file: which context files are stored, and when a build last asked for each. */
export class BuildFileRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Records files as used at `at`: the row is made on the first upload, its use time moved after. */
  async touch(row: Omit<BuildFileRow, 'created_at' | 'used_at'>, at: number): Promise<void> {
    const moved = await this.db.updateTable('t_svc_build_file').set({ used_at: at }).where('artifact_id', '=', row.artifact_id).executeTakeFirst();
    if (Number(moved.numUpdatedRows) > 0) return;
    try {
      await this.db.insertInto('t_svc_build_file').values({ ...row, created_at: at, used_at: at }).execute();
    } catch (err) {
      // Another request (or master) made the row between the two: it is recorded either way.
      const again = await this.db.updateTable('t_svc_build_file').set({ used_at: at }).where('artifact_id', '=', row.artifact_id).executeTakeFirst();
      if (Number(again.numUpdatedRows) === 0) throw err;
    }
  }

  /** Writes a new row (an upload's reservation: files-quota.ts). */
  async insert(row: Omit<BuildFileRow, 'created_at' | 'used_at'>, at: number): Promise<void> {
    await this.db.insertInto('t_svc_build_file').values({ ...row, created_at: at, used_at: at }).execute();
  }

  /** Removes a row, whatever its use time. */
  async forget(artifactId: string): Promise<void> {
    await this.db.deleteFrom('t_svc_build_file').where('artifact_id', '=', artifactId).execute();
  }

  /** Removes the rows whose id begins with `prefix` made before `before`; answers how many. */
  async forgetOlderWithPrefix(prefix: string, before: number): Promise<number> {
    const r = await this.db.deleteFrom('t_svc_build_file').where('artifact_id', 'like', `${prefix}%`).where('created_at', '<', before).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** The bytes of a team's stored files (and uploads under way), but for one artifact (its own earlier upload, replaced). */
  async teamBytes(teamId: string, except = ''): Promise<number> {
    const r = await this.db.selectFrom('t_svc_build_file').select((eb) => eb.fn.sum<number | string | null>('size_bytes').as('n'))
      .where('team_id', '=', teamId).where('artifact_id', '!=', except).executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /** Files no build asked for since `before`, oldest first. */
  unusedSince(before: number, limit: number): Promise<BuildFileRow[]> {
    return this.db.selectFrom('t_svc_build_file').selectAll().where('used_at', '<', before).orderBy('used_at').limit(limit).execute();
  }

  /** Forgets files still unused since `before`; false when a build asked for them meanwhile (the row stays). */
  async forgetIfUnused(artifactId: string, before: number): Promise<boolean> {
    const r = await this.db.deleteFrom('t_svc_build_file').where('artifact_id', '=', artifactId).where('used_at', '<', before).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }
}
