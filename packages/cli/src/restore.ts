/**
 * `svc restore`: a backup of `svc backup` put back into a data directory (docs/configuration.md,
 * "Backing up an embedded install"), with the platform stopped. Nothing is overwritten: what is in
 * the way is refused, or with --force moved aside into `<data_dir>/before-restore-<time>/`, the
 * database's WAL and shared-memory files with it (a WAL left beside a restored database would be
 * replayed onto it).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { SvcConfig } from '@svc/common';
import { knowsMigration } from '@svc/master/database-backup';
import { runTool, vaultKeyPath, type BackupManifest } from './backup.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { localVolumeRoot } from './local-volume-plugin.ts';
import { CliError, UsageError } from './errors.ts';

export interface RestoreOptions {
  cfg: SvcConfig;
  /** The backup's directory (svc backup's <dir>). */
  from: string;
  /** The directory --vault-key-to wrote (key.json in it). */
  vaultKeyFrom?: string;
  /** Move what is in the way aside instead of refusing. */
  force?: boolean;
  env?: NodeJS.ProcessEnv;
}

export interface RestoreResult {
  restored: Array<{ what: string; to: string }>;
  /** Where what was in the way went (--force). */
  movedAside?: string;
  /** What this restore did not put back, each with what to do. */
  notRestored: string[];
}

interface Step { what: string; from: string; to: string; companions?: string[] }

export async function restore(o: RestoreOptions): Promise<RestoreResult> {
  const { cfg } = o;
  const from = resolve(o.from);
  const dataDir = resolve(cfg.data_dir);
  const manifest = readManifest(from);
  const steps = plan(o, from, dataDir, manifest);

  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // The platform must be stopped: svc up holds this lock while it runs, and a start during the
  // restore waits for it.
  const lock = lockDataDir(dataDir);
  try {
    const inTheWay = steps.flatMap((s) => [s.to, ...(s.companions ?? [])]).filter((p) => existsSync(p) && !(statSync(p).isDirectory() && readdirSync(p).length === 0));
    let movedAside: string | undefined;
    if (inTheWay.length > 0) {
      if (!o.force) throw new UsageError(`these are in the way, and a restore never writes over them: ${inTheWay.join(', ')}. Restore into a new --data-dir, or add --force to move them aside`);
      movedAside = join(dataDir, `before-restore-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      mkdirSync(movedAside, { mode: 0o700 });
      for (const p of inTheWay) await runTool('mv', ['--', p, join(movedAside, `${basename(dirname(p))}-${basename(p)}`)], `${p} could not be moved aside`);
    }
    const restored: RestoreResult['restored'] = [];
    for (const s of steps) {
      mkdirSync(dirname(s.to), { recursive: true, mode: 0o700 });
      // A directory left empty is replaced, not copied into (cp -a would nest the copy in it).
      if (existsSync(s.to)) await runTool('rmdir', ['--', s.to], `${s.to} could not be replaced`);
      await runTool('cp', ['-a', '--', s.from, s.to], `${s.what} could not be put back at ${s.to}`);
      restored.push({ what: s.what, to: s.to });
    }
    return { restored, ...(movedAside ? { movedAside } : {}), notRestored: notRestored(o, manifest) };
  } finally {
    lock.release();
  }
}

function readManifest(from: string): BackupManifest {
  const file = join(from, 'backup.json');
  if (!existsSync(file)) throw new UsageError(`${from} is not a backup of svc backup: it has no backup.json`);
  let m: BackupManifest;
  try {
    m = JSON.parse(readFileSync(file, 'utf8')) as BackupManifest;
  } catch (err) {
    throw new CliError(`${file} is not valid JSON (${(err as Error).message}): the backup is damaged`);
  }
  if (!Array.isArray(m.items) || !m.database) throw new CliError(`${file} is not a backup's manifest (no items or database)`);
  return m;
}

/** Where each part of the backup goes under this configuration; refuses what cannot be put back. */
function plan(o: RestoreOptions, from: string, dataDir: string, m: BackupManifest): Step[] {
  const { cfg } = o;
  const volumeRoot = localVolumeRoot(cfg, o.env);
  const steps: Step[] = [];
  for (const item of m.items) {
    if (item.what === 'vault key') continue; // kept apart: --vault-key-from
    const src = join(from, item.to);
    if (!existsSync(src)) throw new CliError(`the backup lists ${item.to} but ${src} is missing: the backup is incomplete`);
    switch (item.to) {
      case 'master.sqlite': {
        if (cfg.master.database.driver !== 'sqlite') throw new UsageError(`the backup holds a SQLite database, and this configuration uses ${cfg.master.database.driver}: restore with the embedded database, or load the data into ${cfg.master.database.driver} yourself`);
        if (m.database.lastMigration && !knowsMigration(m.database.lastMigration)) {
          throw new UsageError(`the backup's database was made by a newer svc (its migration ${m.database.lastMigration} is unknown to this one): restore it with that svc or a later one`);
        }
        const db = cfg.master.database.path;
        steps.push({ what: 'database', from: src, to: db, companions: [`${db}-wal`, `${db}-shm`] });
        break;
      }
      case 'secrets.json': steps.push({ what: item.what, from: src, to: join(dataDir, 'secrets.json') }); break;
      case 'tls': steps.push({ what: item.what, from: src, to: join(dataDir, 'tls') }); break;
      case 'egress-ca': steps.push({ what: item.what, from: src, to: cfg.egress.ca_dir }); break;
      case 'artifacts':
        if (cfg.template_center.s3.endpoint && cfg.template_center.s3.bucket) throw new UsageError(`the backup holds artifacts on disk, and this configuration keeps them in the S3 bucket ${cfg.template_center.s3.bucket}: copy ${src} into the bucket yourself, or restore without S3`);
        steps.push({ what: item.what, from: src, to: cfg.template_center.artifact_dir });
        break;
      case 'volumes': steps.push({ what: item.what, from: src, to: volumeRoot }); break;
      case 'config.yaml': break; // where it goes is the operator's choice: notRestored says so
      default: throw new UsageError(`the backup holds ${item.to}, which this svc does not know how to put back (a backup of a newer svc?)`);
    }
  }
  if (o.vaultKeyFrom !== undefined) {
    const key = join(resolve(o.vaultKeyFrom), 'key.json');
    if (!existsSync(key)) throw new UsageError(`--vault-key-from: ${key} does not exist (the directory svc backup's --vault-key-to wrote)`);
    steps.push({ what: 'vault key', from: key, to: vaultKeyPath(cfg) });
  }
  return steps;
}

function notRestored(o: RestoreOptions, m: BackupManifest): string[] {
  const out: string[] = [];
  if (m.items.some((i) => i.to === 'config.yaml')) out.push(`the configuration: it is in ${join(resolve(o.from), 'config.yaml')}; put it where svc up's --config (or SVC_CONFIG) reads it`);
  if (o.vaultKeyFrom === undefined) {
    const key = vaultKeyPath(o.cfg);
    out.push(existsSync(key)
      ? `the vault's key: the one in place (${key}) is kept; it reads the restored secrets only if it is the key of the install backed up (else give --vault-key-from)`
      : 'the vault\'s key: without --vault-key-from the restored secrets cannot be read (a new key is made at start, and they stay sealed)');
  }
  if (m.database.driver !== 'sqlite') out.push(`the database (${m.database.driver}): restore it with the engine's own tools`);
  return out;
}

