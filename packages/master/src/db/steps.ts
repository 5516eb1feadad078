import { sql, type Kysely } from 'kysely';
import type { DbDriver } from './connect.ts';

/** Portable column types; each maps to the same meaning on SQLite, PostgreSQL and MySQL. */
/** `longtext`: text past MySQL's 64 KiB `text` (mediumtext there, 16 MiB). */
type ColumnType = 'id' | 'string' | 'text' | 'longtext' | 'int' | 'bigint' | 'bool' | 'double';

interface ColumnDef {
  name: string;
  type: ColumnType;
  /** Default false: columns are NOT NULL unless said otherwise. */
  nullable?: boolean;
  primaryKey?: boolean;
  unique?: boolean;
  default?: string | number | boolean;
  /**
   * MySQL: compared byte for byte (utf8mb4_bin), as SQLite and PostgreSQL compare; its default
   * collation ignores case, so `Data` found `data` and the two could not both be kept. For names
   * and keys users choose; ignored on the other engines.
   */
  exact?: boolean;
}

export type MigrationStep =
  | { op: 'createTable'; table: string; columns: ColumnDef[]; primaryKey?: string[] }
  | { op: 'addColumn'; table: string; column: ColumnDef }
  | { op: 'createIndex'; table: string; name: string; columns: string[]; unique?: boolean }
  /**
   * MySQL only: restates a column whole (type, nullability, default, `exact`), its indexes kept.
   * The other engines' columns already hold and compare what MySQL's are changed to, so there it
   * does nothing. Idempotent: the same definition again changes nothing.
   */
  | { op: 'mysqlModifyColumn'; table: string; column: ColumnDef };

const TEXT_TYPES: ReadonlySet<ColumnType> = new Set(['id', 'string', 'text', 'longtext']);

function sqlType(t: ColumnType, driver: DbDriver, exact = false): string | ReturnType<typeof sql.raw> {
  const binary = exact && TEXT_TYPES.has(t);
  if (driver === 'mysql' && (t === 'longtext' || binary)) {
    // Kysely's type parser knows no mediumtext, character set or collation: given raw.
    return sql.raw(`${t === 'longtext' ? 'mediumtext' : plainType(t)}${binary ? ' character set utf8mb4 collate utf8mb4_bin' : ''}`);
  }
  return plainType(t);
}

function plainType(t: ColumnType): string {
  switch (t) {
    case 'longtext': return 'text';
    case 'id': return 'varchar(128)';
    case 'string': return 'varchar(255)';
    case 'text': return 'text';
    case 'int': return 'integer';
    case 'bigint': return 'bigint';
    case 'bool': return 'integer';
    case 'double': return 'double precision';
  }
}

/** A column's NOT NULL and default, as a migration step declares them (added or modified alike). */
function nullAndDefault<B extends { notNull(): B; defaultTo(v: unknown): B }>(col: B, c: { nullable?: boolean; default?: unknown }): B {
  let x = col;
  if (!c.nullable) x = x.notNull();
  if (c.default !== undefined) x = x.defaultTo(typeof c.default === 'boolean' ? Number(c.default) : c.default);
  return x;
}

export async function applyStep(db: Kysely<any>, driver: DbDriver, step: MigrationStep): Promise<void> {
  switch (step.op) {
    case 'createTable': {
      let b = db.schema.createTable(step.table).ifNotExists();
      for (const c of step.columns) {
        b = b.addColumn(c.name, sqlType(c.type, driver, c.exact) as never, (col) => {
          let x = col;
          if (!c.nullable) x = x.notNull();
          if (c.primaryKey) x = x.primaryKey();
          if (c.unique) x = x.unique();
          if (c.default !== undefined) x = x.defaultTo(typeof c.default === 'boolean' ? Number(c.default) : c.default);
          return x;
        });
      }
      if (step.primaryKey) b = b.addPrimaryKeyConstraint(`${step.table}_pk`, step.primaryKey as never);
      await b.execute();
      return;
    }
    case 'addColumn': {
      const exists = await columnExists(db, driver, step.table, step.column.name);
      if (exists) return;
      const c = step.column;
      await db.schema.alterTable(step.table).addColumn(c.name, sqlType(c.type, driver, c.exact) as never, (col) => nullAndDefault(col, c)).execute();
      return;
    }
    case 'mysqlModifyColumn': {
      if (driver !== 'mysql') return;
      const c = step.column;
      await db.schema.alterTable(step.table).modifyColumn(c.name, sqlType(c.type, driver, c.exact) as never, (col) => nullAndDefault(col, c)).execute();
      return;
    }
    case 'createIndex': {
      if (driver === 'mysql') {
        // MySQL has no CREATE INDEX IF NOT EXISTS
        const r = await sql<{ n: number }>`select count(*) as n from information_schema.statistics
          where table_schema = database() and table_name = ${step.table} and index_name = ${step.name}`.execute(db);
        if (Number(r.rows[0]?.n ?? 0) > 0) return;
        let b = db.schema.createIndex(step.name).on(step.table).columns(step.columns);
        if (step.unique) b = b.unique();
        await b.execute();
        return;
      }
      let b = db.schema.createIndex(step.name).ifNotExists().on(step.table).columns(step.columns);
      if (step.unique) b = b.unique();
      await b.execute();
      return;
    }
  }
}

async function columnExists(db: Kysely<any>, driver: DbDriver, table: string, column: string): Promise<boolean> {
  if (driver === 'sqlite') {
    const r = await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(db);
    return r.rows.some((x) => x.name === column);
  }
  const r = await sql<{ n: number }>`select count(*) as n from information_schema.columns
    where table_name = ${table} and column_name = ${column}
    and table_schema = ${driver === 'mysql' ? sql`database()` : sql`current_schema()`}`.execute(db);
  return Number(r.rows[0]?.n ?? 0) > 0;
}
