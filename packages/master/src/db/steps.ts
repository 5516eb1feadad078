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
}

export type MigrationStep =
  | { op: 'createTable'; table: string; columns: ColumnDef[]; primaryKey?: string[] }
  | { op: 'addColumn'; table: string; column: ColumnDef }
  | { op: 'createIndex'; table: string; name: string; columns: string[]; unique?: boolean };

function sqlType(t: ColumnType, driver: DbDriver): string | ReturnType<typeof sql.raw> {
  switch (t) {
    // Kysely's type parser knows no mediumtext: given raw.
    case 'longtext': return driver === 'mysql' ? sql.raw('mediumtext') : 'text';
    case 'id': return 'varchar(128)';
    case 'string': return 'varchar(255)';
    case 'text': return 'text';
    case 'int': return 'integer';
    case 'bigint': return 'bigint';
    case 'bool': return 'integer';
    case 'double': return 'double precision';
  }
}

export async function applyStep(db: Kysely<any>, driver: DbDriver, step: MigrationStep): Promise<void> {
  switch (step.op) {
    case 'createTable': {
      let b = db.schema.createTable(step.table).ifNotExists();
      for (const c of step.columns) {
        b = b.addColumn(c.name, sqlType(c.type, driver) as never, (col) => {
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
      await db.schema.alterTable(step.table).addColumn(c.name, sqlType(c.type, driver) as never, (col) => {
        let x = col;
        if (!c.nullable) x = x.notNull();
        if (c.default !== undefined) x = x.defaultTo(typeof c.default === 'boolean' ? Number(c.default) : c.default);
        return x;
      }).execute();
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
