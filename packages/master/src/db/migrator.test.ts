import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from './connect.ts';
import { migrate, MigrationError, type Migration } from './migrator.ts';
import { availableTestDatabases } from './test-databases.ts';
import { migrations } from '../migrations/index.ts';

const a: Migration = {
  name: '20260101000000_a',
  steps: [{ op: 'createTable', table: 't_test_a', columns: [{ name: 'id', type: 'id', primaryKey: true }, { name: 'v', type: 'int' }] }],
};
const b: Migration = {
  name: '20260102000000_b',
  steps: [{ op: 'addColumn', table: 't_test_a', column: { name: 'note', type: 'string', nullable: true } }],
};
const early: Migration = {
  name: '20251231000000_early',
  steps: [
    { op: 'createTable', table: 't_test_early', columns: [{ name: 'id', type: 'id', primaryKey: true }] },
    { op: 'createIndex', table: 't_test_a', name: 'i_test_a_v', columns: ['v'] },
  ],
};

for (const db of availableTestDatabases()) {
  test(`migrations on ${db.driver}`, { skip: db.skip }, async (t) => {
    const tdb = await db.create!();
    const conn = await openDatabase(tdb.config);
    try {
      await t.test('applies the platform migrations from empty, then nothing twice', async () => {
        const first = await migrate(conn.kysely, conn.driver, migrations);
        assert.deepEqual(first.applied, migrations.map((m) => m.name).sort());
        const again = await migrate(conn.kysely, conn.driver, migrations);
        assert.deepEqual(again.applied, []);
      });
      await t.test('applies a migration merged later with an older timestamp (out of order)', async () => {
        await migrate(conn.kysely, conn.driver, [...migrations, a, b]);
        const r = await migrate(conn.kysely, conn.driver, [...migrations, a, b, early]);
        assert.deepEqual(r.applied, ['20251231000000_early']);
        await conn.kysely.insertInto('t_test_a' as never).values({ id: 'x', v: 1, note: 'n' } as never).execute();
      });
      await t.test('refuses to start when an applied migration was edited', async () => {
        const edited: Migration = { ...b, steps: [{ op: 'addColumn', table: 't_test_a', column: { name: 'note', type: 'text', nullable: true } }] };
        await assert.rejects(migrate(conn.kysely, conn.driver, [...migrations, a, edited, early]),
          (e: Error) => e instanceof MigrationError && /20260102000000_b was changed after it was applied/.test(e.message));
      });
      await t.test('reports applied migrations this build does not know', async () => {
        const r = await migrate(conn.kysely, conn.driver, migrations);
        assert.deepEqual(r.unknown.sort(), ['20251231000000_early', '20260101000000_a', '20260102000000_b']);
      });
      await t.test('rejects badly named migrations', async () => {
        await assert.rejects(migrate(conn.kysely, conn.driver, [{ name: '2026_bad', steps: [] }]), /14-digit/);
      });
    } finally {
      await conn.close();
      await tdb.drop();
    }
  });
}
