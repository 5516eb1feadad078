import type { Kysely, Selectable } from 'kysely';
import { conflict } from '@svc/common';
import type { Database } from '../db/schema.ts';
import { isUniqueViolation } from '../templates/store/unique-violation.ts';
import type { SecretRow, SecretVersionRow } from './tables.ts';

export type SecretDbRow = Selectable<SecretRow>;

/** A secret's current version, sealed. */
export interface SealedCurrent {
  secretId: string;
  name: string;
  version: number;
  sealedValue: string;
}

/** How often an update re-reads a secret that another update moved on under it. */
const UPDATE_ATTEMPTS = 5;

/** Database access for t_svc_secret and t_svc_secret_version; every read and write is scoped to a team. */
export class SecretRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Stores a new secret with its first version; false when the team already has a secret of that name. */
  async insert(secret: SecretRow, first: SecretVersionRow): Promise<boolean> {
    try {
      await this.db.transaction().execute(async (tx) => {
        await tx.insertInto('t_svc_secret').values(secret).execute();
        await tx.insertInto('t_svc_secret_version').values(first).execute();
      });
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  async byId(teamId: string, secretId: string): Promise<SecretDbRow | undefined> {
    return this.db.selectFrom('t_svc_secret').selectAll().where('team_id', '=', teamId).where('secret_id', '=', secretId).executeTakeFirst();
  }

  /** `name` lower-case, as stored. */
  async byName(teamId: string, name: string): Promise<SecretDbRow | undefined> {
    return this.db.selectFrom('t_svc_secret').selectAll().where('team_id', '=', teamId).where('name', '=', name).executeTakeFirst();
  }

  /**
   * Appends the next version (sealed by `sealFor`, which learns its number) and makes it
   * current; metadata, when given, replaces the old. The version moves on only from the one
   * read, so two updates at once both land, one after the other. undefined: no such secret.
   */
  async appendVersion(teamId: string, secretId: string, sealFor: (version: number) => string, metadata: string | undefined, now: number): Promise<SecretDbRow | undefined> {
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      const updated = await this.db.transaction().execute(async (tx) => {
        const row = await tx.selectFrom('t_svc_secret').selectAll().where('team_id', '=', teamId).where('secret_id', '=', secretId).executeTakeFirst();
        if (!row) return { gone: true as const };
        const version = row.current_version + 1;
        const moved = await tx.updateTable('t_svc_secret')
          .set({ current_version: version, updated_at: now, ...(metadata === undefined ? {} : { metadata }) })
          .where('secret_id', '=', secretId).where('current_version', '=', row.current_version)
          .executeTakeFirst();
        if (Number(moved.numUpdatedRows) === 0) return { raced: true as const };
        await tx.insertInto('t_svc_secret_version').values({ secret_id: secretId, version, sealed_value: sealFor(version), created_at: now }).execute();
        return { row: { ...row, current_version: version, updated_at: now, metadata: metadata ?? row.metadata } };
      });
      if ('gone' in updated) return undefined;
      if ('row' in updated) return updated.row;
    }
    throw conflict(`secret ${secretId} is being updated by others at this moment (${UPDATE_ATTEMPTS} attempts in a row lost the race); try again`);
  }

  /** Removes a team's secret and every version of it; false when the team has no such secret. */
  async delete(teamId: string, secretId: string): Promise<boolean> {
    return this.db.transaction().execute(async (tx) => {
      const gone = await tx.deleteFrom('t_svc_secret').where('team_id', '=', teamId).where('secret_id', '=', secretId).executeTakeFirst();
      if (Number(gone.numDeletedRows) === 0) return false;
      await tx.deleteFrom('t_svc_secret_version').where('secret_id', '=', secretId).execute();
      return true;
    });
  }

  /** Oldest first, keyset-paginated on (created_at, secret_id). */
  async list(teamId: string, opts: { after?: { createdAt: number; id: string }; limit: number }): Promise<SecretDbRow[]> {
    let q = this.db.selectFrom('t_svc_secret').selectAll().where('team_id', '=', teamId);
    if (opts.after) {
      const { createdAt, id } = opts.after;
      q = q.where((eb) => eb.or([eb('created_at', '>', createdAt), eb.and([eb('created_at', '=', createdAt), eb('secret_id', '>', id)])]));
    }
    return q.orderBy('created_at', 'asc').orderBy('secret_id', 'asc').limit(opts.limit).execute();
  }

  /** The current version of each of a team's secrets named (names lower-case). */
  async currentSealed(teamId: string, names: string[]): Promise<SealedCurrent[]> {
    if (names.length === 0) return [];
    const rows = await this.db.selectFrom('t_svc_secret as s')
      .innerJoin('t_svc_secret_version as v', (j) => j.onRef('v.secret_id', '=', 's.secret_id').onRef('v.version', '=', 's.current_version'))
      .select(['s.secret_id', 's.name', 'v.version', 'v.sealed_value'])
      .where('s.team_id', '=', teamId).where('s.name', 'in', names)
      .execute();
    return rows.map((r) => ({ secretId: r.secret_id, name: r.name, version: r.version, sealedValue: r.sealed_value }));
  }

  /** Which of these (lower-case) names the team has a secret of. */
  async existingNames(teamId: string, names: string[]): Promise<Set<string>> {
    if (names.length === 0) return new Set();
    const rows = await this.db.selectFrom('t_svc_secret').select('name').where('team_id', '=', teamId).where('name', 'in', names).execute();
    return new Set(rows.map((r) => r.name));
  }
}
