/**
 * `svc backup`: what an embedded install keeps, copied while it runs (docs/configuration.md,
 * "Backing up an embedded install"). The backup mirrors the data directory's layout, so a
 * restore is putting its files back where they were. The vault's key goes apart from the rest,
 * or not at all: together with the database it is every team's secrets in the clear.
 */
import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, isAbsolute } from 'node:path';
import { promisify } from 'node:util';
import type { SvcConfig } from '@svc/common';
import { copySqliteDatabase } from '@svc/master/database-backup';
import { CliError, UsageError } from './errors.ts';
import { localVolumeRoot } from './local-volume-plugin.ts';

const run = promisify(execFile);

export interface BackupOptions {
  cfg: SvcConfig;
  /** A directory that does not exist yet, or an empty one; made 0700. */
  dest: string;
  /** Where the vault's key goes (a directory outside `dest`); absent: not copied, and said so. */
  vaultKeyTo?: string;
  /** Templates' file systems and snapshots' layers (large). */
  artifacts?: boolean;
  /** The local volume plugin's data: users' files. */
  volumes?: boolean;
  /** The configuration file the platform runs with, copied as config.yaml. */
  configFile?: string;
  /** The local volume plugin's root when not the default (SVC_LOCAL_VOLUME_ROOT). */
  env?: NodeJS.ProcessEnv;
}

interface BackupItem {
  what: string;
  from: string;
  /** Relative to the backup's directory, or absolute for the vault key kept apart. */
  to: string;
  bytes: number;
}

export interface BackupManifest {
  createdAt: string;
  dataDir: string;
  database: { driver: string; lastMigration?: string };
  items: BackupItem[];
  /** What this backup does not hold, each with what to do about it. */
  notIncluded: string[];
}

const within = (dir: string, path: string) => {
  const r = relative(dir, path);
  return r === '' || (!r.startsWith('..') && !isAbsolute(r));
};

export async function backup(o: BackupOptions): Promise<BackupManifest> {
  const { cfg } = o;
  const dest = resolve(o.dest);
  const dataDir = resolve(cfg.data_dir);
  if (!existsSync(dataDir)) throw new CliError(`the data directory ${dataDir} does not exist: nothing to back up (--data-dir or SVC_DATA_DIR names another)`);
  if (within(dataDir, dest)) throw new UsageError(`the backup's directory ${dest} is inside the data directory ${dataDir}: a backup must survive the loss of what it copies`);
  if (within(dest, dataDir)) throw new UsageError(`the backup's directory ${dest} holds the data directory ${dataDir}`);
  const vaultKeyTo = o.vaultKeyTo === undefined ? undefined : resolve(o.vaultKeyTo);
  if (vaultKeyTo !== undefined && (within(dest, vaultKeyTo) || within(vaultKeyTo, dest))) {
    throw new UsageError(`--vault-key-to ${vaultKeyTo} must be apart from the backup's directory ${dest}: the key and the database together are the vault's secrets in the clear`);
  }
  if (existsSync(dest) && readdirSync(dest).length > 0) throw new UsageError(`${dest} is not empty: a backup goes into a new or empty directory`);
  mkdirSync(dest, { recursive: true, mode: 0o700 });
  chmodSync(dest, 0o700);

  const items: BackupItem[] = [];
  const notIncluded: string[] = [];
  const manifest: BackupManifest = { createdAt: new Date().toISOString(), dataDir, database: { driver: cfg.master.database.driver }, items, notIncluded };

  const db = cfg.master.database;
  if (db.driver === 'sqlite') {
    const copy = await copySqliteDatabase(db.path, join(dest, 'master.sqlite')).catch((err: Error) => {
      throw new CliError(`the database could not be copied: ${err.message}`);
    });
    items.push({ what: 'database', from: db.path, to: 'master.sqlite', bytes: copy.bytes });
    if (copy.lastMigration) manifest.database.lastMigration = copy.lastMigration;
  } else {
    notIncluded.push(`the database (${db.driver}): back it up with ${db.driver === 'postgres' ? 'pg_dump' : 'mysqldump'}; this backup holds the rest`);
  }

  const file = (what: string, from: string, to: string) => {
    if (!existsSync(from)) return;
    copyFileSync(from, join(dest, to));
    chmodSync(join(dest, to), 0o600);
    items.push({ what, from, to, bytes: statSync(from).size });
  };
  file('generated keys and tokens', join(dataDir, 'secrets.json'), 'secrets.json');
  if (o.configFile) file('configuration', resolve(o.configFile), 'config.yaml');
  await tree('local TLS CA (svc up --tls)', join(dataDir, 'tls'), dest, 'tls', items);
  await tree('egress CA', cfg.egress.ca_dir, dest, 'egress-ca', items);

  const vaultKey = vaultKeyPath(cfg);
  if (!existsSync(vaultKey)) {
    notIncluded.push(`the vault's key: ${vaultKey} does not exist (no secret was ever stored, or the key lives elsewhere)`);
  } else if (vaultKeyTo === undefined) {
    notIncluded.push(`the vault's key (${vaultKey}): copy it somewhere apart from this backup, or run again with --vault-key-to <dir>; without it the vault's secrets cannot be read`);
  } else {
    mkdirSync(vaultKeyTo, { recursive: true, mode: 0o700 });
    const to = join(vaultKeyTo, 'key.json');
    if (existsSync(to)) throw new UsageError(`${to} exists already: a backup never writes over a key`);
    copyFileSync(vaultKey, to);
    chmodSync(to, 0o600);
    items.push({ what: 'vault key', from: vaultKey, to, bytes: statSync(vaultKey).size });
  }

  if (cfg.template_center.s3.endpoint && cfg.template_center.s3.bucket) {
    notIncluded.push(`artifacts: they are in the S3 bucket ${cfg.template_center.s3.bucket}; back it up with the store's own tools`);
  } else if (o.artifacts) {
    await tree('artifacts (templates, snapshots, pause packages)', cfg.template_center.artifact_dir, dest, 'artifacts', items);
  } else {
    notIncluded.push(`artifacts (${cfg.template_center.artifact_dir}): templates can be built again, snapshots and paused sandboxes cannot; add --artifacts`);
  }
  const volumeRoot = localVolumeRoot(cfg, o.env);
  if (o.volumes) await tree('volumes (the local plugin\'s data)', volumeRoot, dest, 'volumes', items);
  else if (existsSync(volumeRoot)) notIncluded.push(`volumes' data (${volumeRoot}): users' files; add --volumes`);
  notIncluded.push('running sandboxes: their memory and files are in no backup (pause them first, then back up with --artifacts)');

  writeFileSync(join(dest, 'backup.json'), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  return manifest;
}

/** Where the master keeps the vault's key (master.vault_key_file, else in the data directory; master/src/index.ts). */
export function vaultKeyPath(cfg: SvcConfig): string {
  return cfg.master.vault_key_file || join(resolve(cfg.data_dir), 'vault', 'key.json');
}

/** Runs a file tool (cp, mv, rmdir); its failure is a CliError saying `what`, with the tool's words. */
export async function runTool(file: string, args: string[], what: string): Promise<string> {
  try {
    return (await run(file, args, { maxBuffer: 1024 * 1024 })).stdout;
  } catch (err) {
    throw new CliError(`${what}: ${((err as { stderr?: string }).stderr || (err as Error).message).trim()}`);
  }
}

/** A directory copied with its owners, modes and sparse files (`cp -a`): volumes hold users' files. */
async function tree(what: string, from: string, dest: string, to: string, items: BackupItem[]): Promise<void> {
  if (!existsSync(from)) return;
  const target = join(dest, to);
  mkdirSync(dirname(target), { recursive: true });
  await runTool('cp', ['-a', '--', from, target], `${what} could not be copied from ${from}`);
  const du = await runTool('du', ['-sb', '--', target], `the size of ${target} could not be read`);
  items.push({ what, from, to, bytes: Number(du.split('\t')[0]) || 0 });
}
