import { test } from 'node:test';
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
            await tdb.drop();
          }
        });
      }
    });
  }
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
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
    await tdb.drop();
  }
}
