import { createHash } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DbDriver } from './connect.ts';
import { applyStep, type MigrationStep } from './steps.ts';

/**
 * A migration is data, not code: a list of declarative steps. Its fingerprint is the hash of
 * that data, so it is the same under tsx and in the bundled CLI, and an edit to an applied
 * migration is caught at start-up.
 */
export interface Migration {
  /** `<14-digit UTC timestamp>_<name>` */
  name: string;
  steps: MigrationStep[];
}

export const MIGRATION_TABLE = 't_svc_migration';
const NAME_RE = /^\d{14}_[a-z0-9_]+$/;

export class MigrationError extends Error {}

function fingerprint(m: Migration): string {
  return createHash('sha256').update(JSON.stringify(m.steps)).digest('hex');
}

export interface MigrateResult { applied: string[]; unknown: string[] }

/**
 * Applies every migration not applied yet, in name order, even when later ones are already
 * applied (out-of-order merges), and refuses to start when an applied one changed.
 */
export async function migrate(db: Kysely<any>, driver: DbDriver, migrations: Migration[]): Promise<MigrateResult> {
  for (const m of migrations) {
    if (!NAME_RE.test(m.name)) throw new MigrationError(`migration name ${m.name} must be <14-digit UTC timestamp>_<name>`);
  }
  const names = new Set<string>();
  for (const m of migrations) {
    if (names.has(m.name)) throw new MigrationError(`migration ${m.name} is defined twice`);
    names.add(m.name);
  }
  return withMigrationLock(db, driver, async () => {
    // Under the lock: two masters starting together raced on the table's creation (PostgreSQL's
    // CREATE TABLE IF NOT EXISTS is not safe against itself).
    await db.schema.createTable(MIGRATION_TABLE).ifNotExists()
      .addColumn('name', 'varchar(128)', (c) => c.primaryKey())
      .addColumn('fingerprint', 'varchar(64)', (c) => c.notNull())
      .addColumn('applied_at', 'bigint', (c) => c.notNull())
      .execute();
    const rows = await db.selectFrom(MIGRATION_TABLE).select(['name', 'fingerprint']).execute() as Array<{ name: string; fingerprint: string }>;
    const applied = new Map(rows.map((r) => [r.name, r.fingerprint]));
    for (const m of migrations) {
      const have = applied.get(m.name);
      if (have !== undefined && have !== fingerprint(m)) {
        throw new MigrationError(
          `migration ${m.name} was changed after it was applied (recorded fingerprint ${have.slice(0, 12)}, ` +
          `now ${fingerprint(m).slice(0, 12)}); applied migrations are immutable: restore it and add a new migration`);
      }
    }
    const done: string[] = [];
    for (const m of [...migrations].sort((a, b) => a.name.localeCompare(b.name))) {
      if (applied.has(m.name)) continue;
      // MySQL cannot roll DDL back, so each step is idempotent (IF NOT EXISTS) and the record is written last.
      for (const step of m.steps) await applyStep(db, driver, step);
      await db.insertInto(MIGRATION_TABLE).values({ name: m.name, fingerprint: fingerprint(m), applied_at: Date.now() }).execute();
      done.push(m.name);
    }
    const unknown = [...applied.keys()].filter((n) => !names.has(n));
    return { applied: done, unknown };
  });
}

async function withMigrationLock<T>(db: Kysely<any>, driver: DbDriver, fn: () => Promise<T>): Promise<T> {
  if (driver === 'postgres') {
    return db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(73110001)`.execute(conn);
      try { return await fn(); } finally { await sql`select pg_advisory_unlock(73110001)`.execute(conn); }
    });
  }
  if (driver === 'mysql') {
    return db.connection().execute(async (conn) => {
      // get_lock answers 0 after its 60 s: another master still migrating. Going on would run
      // the same DDL twice, which MySQL cannot roll back.
      const got = await sql<{ got: number | string | null }>`select get_lock('svc_migrations', 60) as got`.execute(conn);
      if (Number(got.rows[0]?.got) !== 1) throw new MigrationError('another master has held the migration lock for 60 s; start this one again when it is done');
      try { return await fn(); } finally { await sql`select release_lock('svc_migrations')`.execute(conn); }
    });
  }
  return fn(); // SQLite: one process owns the file in the embedded mode
}
