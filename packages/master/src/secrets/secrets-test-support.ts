/**
 * What the secrets vault's tests share: the routes over a real database and vault, and calls
 * through them. Every value holds MARKER, so finding it nowhere in storage shows that no value is
 * stored in the clear.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { createHttpApp, randomId, silentLogger, type DatabaseConfig } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';
import type { WireSecret } from '@svc/contracts/secrets';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { openDatabase, type Db } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { migrations } from '../migrations/index.ts';
import { newVaultKeyFile, Vault } from '../vault/vault.ts';
import { SecretRepo } from './repo.ts';
import { registerSecretRoutes } from './routes.ts';
import { SecretService } from './service.ts';

export const ADMIN_TOKEN = 'egress-admin-token-for-tests';
export const MARKER = `plain-${randomId(16)}`;
export const secretValue = (s: string) => `${MARKER}-${s}`;
export const newTeam = () => `team-${randomId(8)}`;
export const WIRE_FIELDS = ['createdAt', 'currentVersion', 'metadata', 'name', 'secretID', 'updatedAt'];

interface CallOpts {
  team?: string;
  /** Sent as JSON when present (even when undefined is not: absent means no body). */
  body?: unknown;
  headers?: Record<string, string>;
}

interface Answer {
  status: number;
  body: any;
  headers: Record<string, unknown>;
}

export async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, o: CallOpts = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(o.team ? { [TEAM_HEADER]: o.team } : {}), ...o.headers };
  const withBody = 'body' in o;
  if (withBody) headers['content-type'] = 'application/json';
  const res = await app.inject({ method, url, headers, ...(withBody ? { payload: JSON.stringify(o.body) } : {}) });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined, headers: res.headers };
}

export async function setup(config: DatabaseConfig) {
  const db = await openDatabase(config);
  await migrate(db.kysely, db.driver, migrations);
  const vault = new Vault(newVaultKeyFile());
  const service = new SecretService(new SecretRepo(db.kysely), vault);
  const app = createHttpApp({ logger: silentLogger() });
  registerSecretRoutes(app, service, ADMIN_TOKEN);
  const tokenless = createHttpApp({ logger: silentLogger() });
  registerSecretRoutes(tokenless, service, '');
  await Promise.all([app.ready(), tokenless.ready()]);
  return {
    db, vault, service, app, tokenless,
    async close() {
      try {
        await Promise.all([app.close(), tokenless.close()]);
      } finally {
        await db.close();
      }
    },
  };
}

export type Harness = Awaited<ReturnType<typeof setup>>;

export async function create(h: Harness, team: string | undefined, body: Record<string, unknown>): Promise<WireSecret> {
  const r = await call(h.app, 'POST', '/secrets', { team, body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as WireSecret;
}

export async function resolve(h: Harness, teamId: string, names: string[]) {
  const r = await call(h.app, 'POST', '/internal/v1/secrets/resolve', { headers: { [EGRESS_ADMIN_TOKEN_HEADER]: ADMIN_TOKEN }, body: { teamId, names } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { values: Record<string, string>; missing: string[] };
}

export async function rowCounts(db: Db): Promise<[number, number]> {
  const secrets = await db.kysely.selectFrom('t_svc_secret').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const versions = await db.kysely.selectFrom('t_svc_secret_version').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return [Number(secrets.n), Number(versions.n)];
}

export async function versionsOf(db: Db, secretId: string) {
  return db.kysely.selectFrom('t_svc_secret_version').selectAll().where('secret_id', '=', secretId).orderBy('version').execute();
}

export const bytes = (n: number, ch = 'x') => ch.repeat(n);

/** No value the tests stored (each holds MARKER) is in the database, nor in its files on disk. */
export async function assertNothingInTheClear(h: Harness, config: DatabaseConfig): Promise<void> {
  const secrets = await h.db.kysely.selectFrom('t_svc_secret').selectAll().execute();
  const versions = await h.db.kysely.selectFrom('t_svc_secret_version').selectAll().execute();
  assert.ok(versions.length > 5, 'the tests stored values to look for');
  assert.ok(!JSON.stringify([secrets, versions]).includes(MARKER));
  for (const v of versions) assert.match(v.sealed_value, /^v1:/);
  if (config.driver === 'sqlite') {
    // The database file and its write-ahead log, as a disk image or a backup would hold them.
    const files = [config.path, `${config.path}-wal`].filter((f) => existsSync(f));
    assert.ok(files.length > 0);
    for (const f of files) assert.ok(!readFileSync(f).includes(MARKER), `${f} holds a value in the clear`);
  }
}
