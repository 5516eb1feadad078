import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { BuildLogRow, BuildRow, BuildStatus } from './tables.ts';

const LEVELS = ['debug', 'info', 'warn', 'error'];

/** Database access for t_svc_build and t_svc_build_log. */
export class BuildRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: BuildRow): Promise<void> {
    await this.db.insertInto('t_svc_build').values(row).execute();
  }

  get(id: string): Promise<BuildRow | undefined> {
    return this.db.selectFrom('t_svc_build').selectAll().where('build_id', '=', id).executeTakeFirst();
  }

  /** Moves the build when its status is still `from`; false when it was not. */
  async transition(id: string, from: BuildStatus, patch: Partial<BuildRow>): Promise<boolean> {
    const now = Date.now();
    const finishing = patch.status === 'ready' || patch.status === 'error';
    const r = await this.db.updateTable('t_svc_build').set({ ...patch, updated_at: now, ...(finishing ? { finished_at: now } : {}) })
      .where('build_id', '=', id).where('status', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Builds a stopped master left waiting or building. */
  unfinished(): Promise<BuildRow[]> {
    return this.db.selectFrom('t_svc_build').selectAll().where('status', 'in', ['waiting', 'building']).execute();
  }

  async appendLog(buildId: string, seq: number, entry: { at: number; level: string; message: string }): Promise<void> {
    await this.db.insertInto('t_svc_build_log').values({ build_id: buildId, seq, ...entry }).execute();
  }

  /** When the build last wrote a log line (0: never). */
  async lastLogAt(buildId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_build_log').select((eb) => eb.fn.max('at').as('at')).where('build_id', '=', buildId).executeTakeFirst();
    return Number(r?.at ?? 0);
  }

  /** Entries from `offset` (their order), at `minLevel` or above. */
  async logs(buildId: string, offset: number, limit: number, minLevel = 'debug'): Promise<BuildLogRow[]> {
    const levels = LEVELS.slice(Math.max(0, LEVELS.indexOf(minLevel)));
    return this.db.selectFrom('t_svc_build_log').selectAll().where('build_id', '=', buildId).where('level', 'in', levels)
      .orderBy('seq').offset(offset).limit(limit).execute();
  }
}
