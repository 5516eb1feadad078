import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type Dialect } from 'kysely';
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DatabaseConfig, Logger } from '@svc/common';
import type { Database } from './schema.ts';

export type DbDriver = DatabaseConfig['driver'];

export interface Db {
  kysely: Kysely<Database>;
  driver: DbDriver;
  close(): Promise<void>;
}

/** Opens the master's database: SQLite (embedded default), PostgreSQL or MySQL/MariaDB. */
export async function openDatabase(cfg: DatabaseConfig, logger?: Logger): Promise<Db> {
  // A pooled connection that the server drops while idle (a restart, an administrator) is
  // replaced at the next query; unheard, the pool's error event would end the process.
  const onIdleError = (err: Error) => {
    if (logger) logger.warn({ driver: cfg.driver, err: err.message }, 'database: an idle pooled connection failed; it is replaced at the next query');
    else process.stderr.write(`database: an idle pooled connection failed (${err.message}); it is replaced at the next query\n`);
  };
  const dialect = await makeDialect(cfg, onIdleError);
  const kysely = new Kysely<Database>({ dialect });
  return { kysely, driver: cfg.driver, close: () => kysely.destroy() };
}

async function makeDialect(cfg: DatabaseConfig, onIdleError: (err: Error) => void): Promise<Dialect> {
  switch (cfg.driver) {
    case 'sqlite': {
      const { default: BetterSqlite3 } = await import('better-sqlite3');
      // A new directory is root's alone: the file holds every sandbox's access tokens (svc up's data
      // directory is made 0700 too, cli/src/up.ts).
      if (cfg.path !== ':memory:') mkdirSync(dirname(cfg.path), { recursive: true, mode: 0o700 });
      const db = new BetterSqlite3(cfg.path);
      // The file 0600 whatever the umask made it (0644 by default), and its WAL and shared-memory
      // files with it: SQLite makes those with the database file's mode.
      if (cfg.path !== ':memory:') {
        for (const f of [cfg.path, `${cfg.path}-wal`, `${cfg.path}-shm`]) {
          try {
            if (existsSync(f)) chmodSync(f, 0o600);
          } catch (err) {
            // A file it may not change (another owner): the database still opens; the operator is told.
            process.emitWarning(`${f} could not be made 0600 (${(err as Error).message}): it holds every sandbox's access tokens`);
          }
        }
      }
      db.pragma('journal_mode = WAL');
      db.pragma('busy_timeout = 5000');
      db.pragma('synchronous = NORMAL');
      return new SqliteDialect({ database: db });
    }
    case 'postgres': {
      const pg = await import('pg');
      // bigint columns hold epoch milliseconds, well inside Number's exact range
      pg.default.types.setTypeParser(20, (v: string) => Number(v));
      const pool = new pg.default.Pool({ connectionString: cfg.url, max: 10 });
      pool.on('error', onIdleError);
      return new PostgresDialect({ pool });
    }
    case 'mysql': {
      const mysql = await import('mysql2');
      return new MysqlDialect({
        pool: mysql.createPool({
          host: cfg.host, port: cfg.port, user: cfg.user, password: cfg.password, database: cfg.database,
          connectionLimit: 10, supportBigNumbers: true, bigNumberStrings: false,
          // Verified against Node's default trust (system CAs and NODE_EXTRA_CA_CERTS), with a hostname check.
          ssl: cfg.tls ? { rejectUnauthorized: true, verifyIdentity: true } : undefined,
        }),
      });
    }
  }
}
