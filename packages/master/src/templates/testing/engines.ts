import { test } from 'node:test';
import type { DatabaseConfig } from '@svc/common';
import { availableTestDatabases } from '../../db/test-databases.ts';
import { Harness, type HarnessOptions } from './harness.ts';

export type Case = ((h: Harness) => Promise<void>) | [Omit<Partial<HarnessOptions>, 'database'>, (h: Harness) => Promise<void>];

/** Runs every case on SQLite, PostgreSQL and MariaDB, each on a fresh database and harness. */
export function onEveryEngine(title: string, cases: Record<string, Case>): void {
  for (const engine of availableTestDatabases()) {
    test(`${title} on ${engine.driver}`, { skip: engine.skip }, async (t) => {
      for (const [name, c] of Object.entries(cases)) {
        const [opts, fn] = typeof c === 'function' ? [{}, c] : c;
        await t.test(name, async () => {
          const tdb = await engine.create!();
          const h = await Harness.start({ ...opts, database: tdb.config });
          try {
            await fn(h);
          } finally {
            await h.close();
            await backendsGone(tdb.config);
            await tdb.drop();
          }
        });
      }
    });
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** For behaviour that does not depend on the database engine: one harness over SQLite. */
export async function withSqliteHarness(opts: Omit<Partial<HarnessOptions>, 'database'>, fn: (h: Harness) => Promise<void>): Promise<void> {
  const engine = availableTestDatabases()[0];
  const tdb = await engine.create!();
  const h = await Harness.start({ ...opts, database: tdb.config });
  try {
    await fn(h);
  } finally {
    await h.close();
    await backendsGone(tdb.config);
    await tdb.drop();
  }
}

/**
 * pg-pool's end() resolves before its sockets are closed; dropping the database `with (force)`
 * right then terminates those backends, and the error reaches a client nobody listens to any more.
 */
async function backendsGone(config: DatabaseConfig): Promise<void> {
  if (config.driver !== 'postgres') return;
  const pg = (await import('pg')).default;
  const admin = new pg.Client({ connectionString: process.env.SVC_TEST_PG_URL });
  await admin.connect();
  try {
    const name = new URL(config.url).pathname.slice(1);
    await waitFor(`connections to ${name} to close`, async () =>
      Number((await admin.query('select count(*) as n from pg_stat_activity where datname = $1', [name])).rows[0].n) === 0);
  } finally {
    await admin.end();
  }
}
