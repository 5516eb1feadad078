/**
 * For tests: a fresh, empty database on each engine the environment offers. SQLite is always
 * there; PostgreSQL and MariaDB come from scripts/test-services.sh (SVC_TEST_PG_URL,
 * SVC_TEST_MYSQL_*). With SVC_TEST_REQUIRE_ALL_DBS=1 (set by the test command) a missing
 * server fails the run instead of skipping.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomId, type DatabaseConfig } from '@svc/common';

export interface TestDatabase {
  name: string;
  config: DatabaseConfig;
  drop(): Promise<void>;
}

export type TestDbFactory = () => Promise<TestDatabase>;

export function availableTestDatabases(): Array<{ driver: string; create?: TestDbFactory; skip?: string }> {
  const requireAll = process.env.SVC_TEST_REQUIRE_ALL_DBS === '1';
  const out: Array<{ driver: string; create?: TestDbFactory; skip?: string }> = [{ driver: 'sqlite', create: sqlite }];
  const pgUrl = process.env.SVC_TEST_PG_URL;
  if (pgUrl) out.push({ driver: 'postgres', create: () => postgres(pgUrl) });
  else if (requireAll) throw new Error('SVC_TEST_PG_URL is not set (run scripts/test-services.sh start)');
  else out.push({ driver: 'postgres', skip: 'SVC_TEST_PG_URL not set' });
  if (process.env.SVC_TEST_MYSQL_HOST) out.push({ driver: 'mysql', create: mysql });
  else if (requireAll) throw new Error('SVC_TEST_MYSQL_HOST is not set (run scripts/test-services.sh start)');
  else out.push({ driver: 'mysql', skip: 'SVC_TEST_MYSQL_HOST not set' });
  return out;
}

async function sqlite(): Promise<TestDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-sqlite-'));
  return { name: 'sqlite', config: { driver: 'sqlite', path: join(dir, 'master.sqlite') }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

async function postgres(baseUrl: string): Promise<TestDatabase> {
  const pg = (await import('pg')).default;
  const dbName = `svc_test_${randomId(10)}`;
  const admin = new pg.Client({ connectionString: baseUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  const url = new URL(baseUrl);
  url.pathname = `/${dbName}`;
  return {
    name: 'postgres',
    config: { driver: 'postgres', url: url.toString() },
    drop: async () => {
      const c = new pg.Client({ connectionString: baseUrl });
      await c.connect();
      await c.query(`drop database if exists ${dbName} with (force)`);
      await c.end();
    },
  };
}

async function mysql(): Promise<TestDatabase> {
  const my = await import('mysql2/promise');
  const conn = {
    host: process.env.SVC_TEST_MYSQL_HOST!, port: Number(process.env.SVC_TEST_MYSQL_PORT ?? 3306),
    user: process.env.SVC_TEST_MYSQL_USER ?? 'root', password: process.env.SVC_TEST_MYSQL_PASSWORD ?? '',
  };
  const dbName = `svc_test_${randomId(10)}`;
  const c = await my.createConnection(conn);
  await c.query(`create database ${dbName}`);
  await c.end();
  return {
    name: 'mysql',
    config: { driver: 'mysql', ...conn, database: dbName },
    drop: async () => {
      const d = await my.createConnection(conn);
      await d.query(`drop database if exists ${dbName}`);
      await d.end();
    },
  };
}
