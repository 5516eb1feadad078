import { chmodSync, existsSync, statSync } from 'node:fs';
import { MIGRATION_TABLE } from './migrator.ts';
import { migrations } from '../migrations/index.ts';

export interface SqliteCopy {
  bytes: number;
  /** The newest migration the copy has applied: a restore needs an svc at least this new. */
  lastMigration: string | undefined;
}

/**
 * A consistent copy of the embedded SQLite database, taken while the platform runs
 * (docs/configuration.md, "Backing up an embedded install"). `VACUUM INTO` writes it from one
 * read transaction: a write under way is in it whole or not at all, where a `cp` of the file and
 * its WAL taken mid-write can be torn. The connection is read-only: the backup never writes to
 * the platform's database. `dest` must not exist; the copy is 0600, as the database is (it holds
 * every sandbox's access tokens, connect.ts).
 */
export async function copySqliteDatabase(src: string, dest: string): Promise<SqliteCopy> {
  if (!existsSync(src)) throw new Error(`the database ${src} does not exist (has svc up run with this data directory?)`);
  if (existsSync(dest)) throw new Error(`${dest} exists already: a backup never writes over a file`);
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const db = new BetterSqlite3(src, { readonly: true, fileMustExist: true });
  let lastMigration: string | undefined;
  try {
    // The platform's writes hold the database for moments; wait them out as the master does.
    db.pragma('busy_timeout = 5000');
    db.prepare('VACUUM INTO ?').run(dest);
    const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(MIGRATION_TABLE);
    if (hasTable) lastMigration = (db.prepare(`SELECT max(name) AS name FROM ${MIGRATION_TABLE}`).get() as { name: string | null }).name ?? undefined;
  } finally {
    db.close();
  }
  chmodSync(dest, 0o600);
  return { bytes: statSync(dest).size, lastMigration };
}

/**
 * Whether this svc knows the migration a backup's database last applied: a database from a
 * newer svc has tables and columns this one does not read, and the master would only warn of it
 * at start (index.ts), once the files were back in place.
 */
export function knowsMigration(name: string): boolean {
  return migrations.some((m) => m.name === name);
}
