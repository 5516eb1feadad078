/**
 * 20261205090000_mysql_long_json and 20261205100000_mysql_exact_names on every engine: over a
 * database the earlier migrations made and filled, they keep its rows, and on MySQL the columns
 * they restate end as they say, nullability and keys as before. The behaviour they are for is
 * tested where it shows: sandboxes/large-fields.test.ts, snapshots, volumes and builds tests.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { applyStep } from '../db/steps.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from './index.ts';
import { migration as longJson } from './20261205090000_mysql_long_json.ts';
import { migration as exactNames } from './20261205100000_mysql_exact_names.ts';

const restated = [...longJson.steps, ...exactNames.steps].map((s) => {
  assert.equal(s.op, 'mysqlModifyColumn');
  return (s as Extract<typeof s, { op: 'mysqlModifyColumn' }>);
});

for (const tdb of availableTestDatabases()) {
  test(`MySQL's long JSON and exact names migrations on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await t.test('over a database the earlier migrations made, its rows are kept and the new rules hold', async () => {
        const earlier = migrations.filter((m) => m.name < longJson.name);
        await migrate(db.kysely, db.driver, earlier);
        const volume = { volume_id: 'v-1', team_id: 'team-a', name: 'Data', driver: 'local', token: '', private_data: '{}', refcount: 0, created_at: 1 };
        await db.kysely.insertInto('t_svc_volume').values(volume).execute();
        await db.kysely.insertInto('t_svc_template_tag').values({ template_id: 'tpl-1', tag: 'default', build_id: 'b-1', created_at: 1 }).execute();
        // Up to these two: later migrations (a column more) are tested where they are used.
        const r = await migrate(db.kysely, db.driver, migrations.filter((m) => m.name <= exactNames.name));
        assert.deepEqual(r.applied, [longJson.name, exactNames.name]);
        assert.deepEqual(await db.kysely.selectFrom('t_svc_volume').selectAll().execute(), [volume]);
        await db.kysely.insertInto('t_svc_volume').values({ ...volume, volume_id: 'v-2', name: 'data' }).execute();
        await db.kysely.insertInto('t_svc_template_tag').values({ template_id: 'tpl-1', tag: 'DEFAULT', build_id: 'b-2', created_at: 2 }).execute();
        await assert.rejects(db.kysely.insertInto('t_svc_volume').values({ ...volume, volume_id: 'v-3' }).execute(), 'the unique key stays');
        await assert.rejects(db.kysely.insertInto('t_svc_template_tag').values({ template_id: 'tpl-1', tag: 'default', build_id: 'b-3', created_at: 3 }).execute(), 'the primary key stays');
        assert.deepEqual((await db.kysely.selectFrom('t_svc_volume').select('volume_id').where('name', '=', 'data').execute()).map((x) => x.volume_id), ['v-2']);
        // A restated JSON column takes a megabyte (MySQL's text: 64 KiB).
        const big = 'x'.repeat(1024 * 1024);
        await db.kysely.insertInto('t_svc_event').values({ event_id: 'e-1', team_id: 'team-a', sandbox_id: 's', type: 't', execution_id: 'x', build_id: 'b', template_id: 'tpl', event_data: big, at: 1 }).execute();
        assert.equal((await db.kysely.selectFrom('t_svc_event').select('event_data').executeTakeFirstOrThrow()).event_data, big);
      });

      await t.test('on MySQL the columns are mediumtext or utf8mb4_bin, nullable as they were made, their keys kept', async () => {
        for (const { table, column } of restated) {
          const where = `${table}.${column.name}`;
          if (db.driver === 'mysql') {
            const r = await sql<{ data_type: string; collation_name: string | null; is_nullable: string }>`select data_type as data_type, collation_name as collation_name, is_nullable as is_nullable
              from information_schema.columns where table_schema = database() and table_name = ${table} and column_name = ${column.name}`.execute(db.kysely);
            const c = r.rows[0];
            assert.ok(c, where);
            assert.equal(c.is_nullable, column.nullable ? 'YES' : 'NO', where);
            assert.equal(c.data_type, { longtext: 'mediumtext', id: 'varchar', string: 'varchar' }[column.type as string], where);
            if (column.exact) assert.equal(c.collation_name, 'utf8mb4_bin', where);
          }
        }
        if (db.driver === 'mysql') {
          const keys = await sql<{ index_name: string }>`select distinct index_name as index_name from information_schema.statistics
            where table_schema = database() and table_name in ('t_svc_volume', 't_svc_snapshot', 't_svc_template_tag')`.execute(db.kysely);
          for (const k of ['u_svc_volume_team_name', 'u_svc_snapshot_name', 'PRIMARY']) assert.ok(keys.rows.some((x) => x.index_name === k), k);
        }
      });

      await t.test('each step again changes nothing (MySQL cannot roll DDL back: a step repeated after a failure must be harmless)', async () => {
        for (const step of restated) await applyStep(db.kysely, db.driver, step);
        assert.deepEqual((await db.kysely.selectFrom('t_svc_volume').select('name').orderBy('volume_id').execute()).map((x) => x.name), ['Data', 'data']);
        assert.equal((await db.kysely.selectFrom('t_svc_event').select('event_data').executeTakeFirstOrThrow()).event_data?.length, 1024 * 1024);
      });
    } finally {
      await db.close();
      await made.drop();
    }
  });
}
