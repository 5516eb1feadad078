/**
 * `svc backup`: a consistent copy of an embedded install while it runs. The database is a real
 * SQLite file in WAL mode held open by a writer, as the master holds it, with rows that are only
 * in its WAL; the bundled CLI runs the command as users do.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import Database from 'better-sqlite3';
import { loadConfig, type SvcConfig } from '@svc/common';
import { backup, type BackupManifest } from './backup.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { CliError, UsageError } from './errors.ts';
import { restore } from './restore.ts';

let root: string;
let dataDir: string;
let writer: Database.Database;
let cfg: SvcConfig;
const asRoot = process.getuid?.() === 0;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  // The master's database as a running platform holds it: WAL, never checkpointed here.
  writer = new Database(join(dataDir, 'master.sqlite'));
  writer.pragma('journal_mode = WAL');
  writer.pragma('wal_autocheckpoint = 0');
  writer.exec("CREATE TABLE t_svc_migration (name varchar(128) primary key, fingerprint varchar(64) not null, applied_at bigint not null)");
  writer.exec("INSERT INTO t_svc_migration VALUES ('20261122110000_templates', 'x', 1), ('20261207100000_snapshot_lease', 'y', 2)");
  writer.exec('CREATE TABLE t_svc_sandbox (id text primary key, token text)');
  const insert = writer.prepare('INSERT INTO t_svc_sandbox VALUES (?, ?)');
  for (let i = 0; i < 500; i++) insert.run(`sbx-${i}`, `token-${i}`);
  writeFileSync(join(dataDir, 'secrets.json'), '{"apiKey":"e2b_x"}', { mode: 0o600 });
  mkdirSync(join(dataDir, 'vault'), { mode: 0o700 });
  writeFileSync(join(dataDir, 'vault', 'key.json'), '{"key":"k"}', { mode: 0o600 });
  mkdirSync(join(dataDir, 'tls'));
  writeFileSync(join(dataDir, 'tls', 'ca.pem'), 'local ca');
  mkdirSync(join(dataDir, 'egress-ca'));
  writeFileSync(join(dataDir, 'egress-ca', 'ca.pem'), 'egress ca');
  mkdirSync(join(dataDir, 'artifacts'));
  writeFileSync(join(dataDir, 'artifacts', 'layer.tar'), 'layer');
  mkdirSync(join(dataDir, 'volumes', 'vol-1'), { recursive: true });
  writeFileSync(join(dataDir, 'volumes', 'vol-1', 'notes.txt'), 'users\' file');
  if (asRoot) chownSync(join(dataDir, 'volumes', 'vol-1', 'notes.txt'), 1000, 1000);
  cfg = loadConfig({ env: {}, overrides: { data_dir: dataDir }, validate: false });
});
after(() => {
  writer.close();
  rmSync(root, { recursive: true, force: true });
});

const rows = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM t_svc_sandbox').get() as { n: number }).n;
  } finally {
    db.close();
  }
};

test('a backup while the database is held open: every committed row, the keys and CAs; the vault key apart or not at all', async () => {
  assert.ok(statSync(join(dataDir, 'master.sqlite-wal')).size > 0, 'the rows are in the WAL, not yet in the file');
  const dest = join(root, 'b1');
  const m = await backup({ cfg, dest });
  assert.equal(rows(join(dest, 'master.sqlite')), 500);
  assert.equal(statSync(dest).mode & 0o777, 0o700);
  assert.equal(statSync(join(dest, 'master.sqlite')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(dest, 'secrets.json'), 'utf8'), '{"apiKey":"e2b_x"}');
  assert.equal(readFileSync(join(dest, 'tls', 'ca.pem'), 'utf8'), 'local ca');
  assert.equal(readFileSync(join(dest, 'egress-ca', 'ca.pem'), 'utf8'), 'egress ca');
  assert.equal(existsSync(join(dest, 'vault')), false, 'the vault key is not in the backup by default');
  assert.equal(existsSync(join(dest, 'artifacts')), false);
  assert.equal(existsSync(join(dest, 'volumes')), false);
  assert.equal(m.database.lastMigration, '20261207100000_snapshot_lease');
  assert.ok(m.notIncluded.some((n) => n.includes('vault\'s key') && n.includes('--vault-key-to')), m.notIncluded.join('\n'));
  assert.ok(m.notIncluded.some((n) => n.includes('--artifacts')));
  assert.ok(m.notIncluded.some((n) => n.includes('--volumes')));
  const onDisk = JSON.parse(readFileSync(join(dest, 'backup.json'), 'utf8')) as BackupManifest;
  assert.deepEqual(onDisk.items.map((i) => i.to), ['master.sqlite', 'secrets.json', 'tls', 'egress-ca']);
  // The writer goes on: the platform was not disturbed.
  writer.prepare('INSERT INTO t_svc_sandbox VALUES (?, ?)').run('sbx-after', 't');
});

test('--vault-key-to, --artifacts and --volumes: the key goes apart; users\' files keep their owners', async () => {
  const dest = join(root, 'b2');
  const keys = join(root, 'keys');
  const m = await backup({ cfg, dest, vaultKeyTo: keys, artifacts: true, volumes: true });
  assert.equal(readFileSync(join(keys, 'key.json'), 'utf8'), '{"key":"k"}');
  assert.equal(statSync(join(keys, 'key.json')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(dest, 'artifacts', 'layer.tar'), 'utf8'), 'layer');
  const copied = statSync(join(dest, 'volumes', 'vol-1', 'notes.txt'));
  if (asRoot) assert.deepEqual([copied.uid, copied.gid], [1000, 1000]);
  assert.deepEqual(m.notIncluded, ['running sandboxes: their memory and files are in no backup (pause them first, then back up with --artifacts)']);
});

test('careless uses are refused before anything is written', async () => {
  const refused = async (o: Parameters<typeof backup>[0], kind: typeof UsageError | typeof CliError, words: RegExp) => {
    await assert.rejects(backup(o), (e: Error) => e instanceof kind && words.test(e.message), words.source);
  };
  const full = join(root, 'full');
  mkdirSync(full);
  writeFileSync(join(full, 'other'), 'x');
  await refused({ cfg, dest: full }, UsageError, /is not empty/);
  await refused({ cfg, dest: join(dataDir, 'backups', 'b') }, UsageError, /inside the data directory/);
  await refused({ cfg, dest: root }, UsageError, /holds the data directory/);
  await refused({ cfg, dest: join(root, 'b3'), vaultKeyTo: join(root, 'b3', 'keys') }, UsageError, /must be apart/);
  assert.equal(existsSync(join(root, 'b3')), false, 'nothing made for a refused backup');
  const missing = loadConfig({ env: {}, overrides: { data_dir: join(root, 'nowhere') }, validate: false });
  await refused({ cfg: missing, dest: join(root, 'b4') }, CliError, /does not exist: nothing to back up/);
  // PostgreSQL: the rest is copied; the database is named as not in it, with the tool to use.
  const pg = structuredClone(cfg);
  pg.master.database = { ...pg.master.database, driver: 'postgres', url: 'postgres://127.0.0.1:1/none' };
  const m = await backup({ cfg: pg, dest: join(root, 'b5') });
  assert.ok(m.notIncluded.some((n) => /\(postgres\): back it up with pg_dump/.test(n)));
  assert.equal(existsSync(join(root, 'b5', 'master.sqlite')), false);
  assert.equal(existsSync(join(root, 'b5', 'secrets.json')), true);
});

/** The CLI from its sources (the bundle keeps better-sqlite3 in node_modules, so it runs from the checkout alone). */
const svc = (args: string[]) => new Promise<{ code: number; stdout: string; stderr: string }>((res) => {
  execFile(process.execPath, ['--import', 'tsx', resolve(import.meta.dirname, 'main.ts'), ...args], { env: { PATH: process.env.PATH, HOME: root } }, (err, stdout, stderr) => {
    res({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
  });
});

test('svc backup as users run it: JSON, a usage error, the words for people', { timeout: 120_000 }, async () => {
  const dest = join(root, 'b6');
  const ok = await svc(['--data-dir', dataDir, 'backup', dest, '--json']);
  assert.equal(ok.code, 0, ok.stderr);
  const m = JSON.parse(ok.stdout) as BackupManifest;
  assert.equal(m.items[0].to, 'master.sqlite');
  assert.equal(rows(join(dest, 'master.sqlite')), 501);
  const again = await svc(['--data-dir', dataDir, 'backup', dest]);
  assert.equal(again.code, 2, 'a usage error');
  assert.match(again.stderr, /^svc: .* is not empty/m);
  const human = await svc(['--data-dir', dataDir, 'backup', join(root, 'b7')]);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /database .*master\.sqlite/);
  assert.match(human.stdout, /not in this backup:\n {2}- the vault's key/);
});

test('svc restore: into a new data directory, the backup as it was; the vault key from apart; nothing written over', async () => {
  const dest = join(root, 'r-backup');
  const keys = join(root, 'r-keys');
  await backup({ cfg, dest, vaultKeyTo: keys, artifacts: true, volumes: true });
  const target = join(root, 'restored');
  const tcfg = loadConfig({ env: {}, overrides: { data_dir: target }, validate: false });
  const r = await restore({ cfg: tcfg, from: dest, vaultKeyFrom: keys });
  assert.deepEqual(r.restored.map((x) => x.what), ['database', 'generated keys and tokens', 'local TLS CA (svc up --tls)', 'egress CA', 'artifacts (templates, snapshots, pause packages)', 'volumes (the local plugin\'s data)', 'vault key']);
  assert.equal(rows(join(target, 'master.sqlite')), 501);
  assert.equal(readFileSync(join(target, 'vault', 'key.json'), 'utf8'), '{"key":"k"}');
  assert.equal(statSync(join(target, 'vault', 'key.json')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(target, 'egress-ca', 'ca.pem'), 'utf8'), 'egress ca');
  assert.equal(readFileSync(join(target, 'artifacts', 'layer.tar'), 'utf8'), 'layer');
  assert.equal(readFileSync(join(target, 'volumes', 'vol-1', 'notes.txt'), 'utf8'), 'users\' file');
  if (asRoot) assert.equal(statSync(join(target, 'volumes', 'vol-1', 'notes.txt')).uid, 1000);
  assert.deepEqual(r.notRestored, []);
  assert.equal(existsSync(join(target, 'svc.lock')), false, 'the lock is given back');

  // Again onto the same directory: refused, naming what is in the way; nothing changed.
  await assert.rejects(restore({ cfg: tcfg, from: dest }), (e: Error) => e instanceof UsageError && /in the way.*master\.sqlite.*--force/.test(e.message));
  // --force: what was there goes aside, the database's WAL with it (a WAL beside a restored database would be replayed onto it).
  const stale = new Database(join(target, 'master.sqlite'));
  stale.pragma('journal_mode = WAL');
  stale.pragma('wal_autocheckpoint = 0');
  stale.exec('DELETE FROM t_svc_sandbox');
  assert.ok(statSync(join(target, 'master.sqlite-wal')).size > 0);
  stale.close();
  writeFileSync(join(target, 'master.sqlite-wal'), readFileSync(join(dataDir, 'master.sqlite-wal')));
  const forced = await restore({ cfg: tcfg, from: dest, force: true });
  assert.ok(forced.movedAside && existsSync(join(forced.movedAside, 'restored-master.sqlite')) && existsSync(join(forced.movedAside, 'restored-master.sqlite-wal')));
  assert.equal(existsSync(join(target, 'master.sqlite-wal')), false);
  assert.equal(rows(join(target, 'master.sqlite')), 501);
  // Without --vault-key-from the key in place stays (a restore of an install onto itself keeps its own key), and it is said.
  assert.equal(readFileSync(join(target, 'vault', 'key.json'), 'utf8'), '{"key":"k"}');
  assert.ok(forced.notRestored.some((n) => /the one in place .* is kept/.test(n)), forced.notRestored.join('\n'));
  const none = await restore({ cfg: loadConfig({ env: {}, overrides: { data_dir: join(root, 'restored-2') }, validate: false }), from: dest });
  assert.ok(none.notRestored.some((n) => /without --vault-key-from the restored secrets cannot be read/.test(n)), none.notRestored.join('\n'));
});

test('svc restore refuses what it cannot put back right', async () => {
  const dest = join(root, 'r2-backup');
  await backup({ cfg, dest });
  const fresh = (name: string) => loadConfig({ env: {}, overrides: { data_dir: join(root, name) }, validate: false });
  await assert.rejects(restore({ cfg: fresh('x1'), from: join(root, 'nothing') }), /has no backup\.json/);
  // svc up runs on the directory: its lock is held (here by this process, which is alive).
  mkdirSync(join(root, 'x2'));
  const held = lockDataDir(join(root, 'x2'));
  try {
    await assert.rejects(restore({ cfg: fresh('x2'), from: dest }), /already running on the data directory/);
  } finally {
    held.release();
  }
  const pg = fresh('x3');
  pg.master.database = { ...pg.master.database, driver: 'postgres', url: 'postgres://127.0.0.1:1/none' };
  await assert.rejects(restore({ cfg: pg, from: dest }), /holds a SQLite database, and this configuration uses postgres/);
  // A backup of a newer svc: its database's migration is unknown here.
  const newer = join(root, 'r3-backup');
  await backup({ cfg, dest: newer });
  const m = JSON.parse(readFileSync(join(newer, 'backup.json'), 'utf8')) as BackupManifest;
  writeFileSync(join(newer, 'backup.json'), JSON.stringify({ ...m, database: { ...m.database, lastMigration: '29991231000000_from_the_future' } }));
  await assert.rejects(restore({ cfg: fresh('x4'), from: newer }), /made by a newer svc/);
  await assert.rejects(restore({ cfg: fresh('x5'), from: dest, vaultKeyFrom: join(root, 'no-keys') }), /--vault-key-from: .*does not exist/);
  rmSync(join(dest, 'secrets.json'));
  await assert.rejects(restore({ cfg: fresh('x6'), from: dest }), /the backup is incomplete/);
  for (const n of ['x1', 'x3', 'x4', 'x5', 'x6']) assert.equal(existsSync(join(root, n, 'master.sqlite')), false, `${n}: nothing written`);
});
