import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { sql } from 'kysely';
import { openDatabase } from './connect.ts';
import { availableTestDatabases } from './test-databases.ts';

const sqliteOnly = availableTestDatabases().find((d) => d.driver === 'sqlite')!;

test('the embedded SQLite database: a file in WAL mode whose rows hold their columns and nothing else', async () => {
  const tdb = await sqliteOnly.create!();
  const db = await openDatabase(tdb.config);
  try {
    const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(db.kysely);
    assert.equal(mode.rows[0]?.journal_mode, 'wal');
    await sql`create table t_connect (id text primary key, n bigint, note text)`.execute(db.kysely);
    // It holds every sandbox's access tokens: the file and its WAL are the master's alone.
    const path = (tdb.config as { path: string }).path;
    for (const f of [path, `${path}-wal`]) assert.equal(statSync(f).mode & 0o777, 0o600, f);
    // Epoch milliseconds, the largest numbers the schema keeps, come back as exact numbers.
    const at = 1_795_000_000_123;
    await sql`insert into t_connect (id, n, note) values (${'a'}, ${at}, ${null})`.execute(db.kysely);
    const rows = await sql<Record<string, unknown>>`select * from t_connect`.execute(db.kysely);
    // A row that reaches an API answer carries only its columns (libsql's rows did not always).
    assert.deepEqual(rows.rows, [{ id: 'a', n: at, note: null }]);
    assert.deepEqual(Object.keys(rows.rows[0]!), ['id', 'n', 'note']);
    // Tried in place of better-sqlite3, libsql cut a text at its first NUL on reading and aborted the
    // whole process on a text that is not UTF-8 (the fuzz test found it): both must hold here.
    await sql`insert into t_connect (id, n, note) values (${'nul'}, ${1}, ${'a\u0000b'})`.execute(db.kysely);
    const nul = await sql<{ note: string }>`select note from t_connect where id = ${'nul'}`.execute(db.kysely);
    assert.equal(nul.rows[0]?.note, 'a\u0000b');
    const bad = await sql<{ v: string }>`select cast(x'ff' as text) as v`.execute(db.kysely);
    assert.equal(typeof bad.rows[0]?.v, 'string');
    await sql`delete from t_connect where id = ${'nul'}`.execute(db.kysely);
    const streamed: unknown[] = [];
    // a streamed query goes through the binding's iterate()
    for await (const r of db.kysely.selectFrom('t_connect' as never).select(sql<string>`id`.as('id')).stream()) streamed.push(r);
    assert.deepEqual(streamed, [{ id: 'a' }]);
  } finally {
    await db.close();
    await tdb.drop();
  }
});
