/**
 * Vault key rotation as docs/security.md describes it: add a key, make it primary, restart, drop
 * the old key. Until the fix only secrets' new versions moved to the new key: workload identity
 * signing keys, webhook secrets and template registry credentials stayed under the old one, and
 * once it was dropped the issuer's reload threw and the master did not start. Now every stale
 * value is sealed anew at start (sealed-columns.ts); one no key opens is logged and skipped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { Kysely } from 'kysely';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import type { Database } from '../db/schema.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { sealContext as webhookContext } from '../events/webhooks.ts';
import { WorkloadIdentityIssuer } from '../identity/issuer.ts';
import { DbSigningKeyStore } from '../identity/key-store.ts';
import { migrations } from '../migrations/index.ts';
import { SecretRepo } from '../secrets/repo.ts';
import { SecretService } from '../secrets/service.ts';
import { recipeOf, storedRecipe } from '../templates/recipe.ts';
import { resealStaleValues } from './sealed-columns.ts';
import { newVaultKeyFile, Vault, type VaultKeyFile } from './vault.ts';

const TEAM = 'team-vault';
const AUTH = { username: 'robot', password: 'registry-pass' };

function recording() {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: 'info' }, { write: (l: string) => { lines.push(JSON.parse(l) as Record<string, unknown>); } }) };
}

const issuerOver = (db: Kysely<Database>, vault: Vault, logger?: pino.Logger) =>
  new WorkloadIdentityIssuer({ store: new DbSigningKeyStore(db, vault, logger), issuerUrl: 'https://issuer.example', trustDomain: 'svc.example' });

/** One of each sealed value, sealed under `vault`; answers their ids. */
async function sealEverything(db: Kysely<Database>, vault: Vault) {
  await issuerOver(db, vault).start();
  const secrets = new SecretService(new SecretRepo(db), vault);
  await secrets.create(TEAM, { name: 'db-password', value: 'first' });
  await secrets.update(TEAM, 'db-password', { value: 'hunter2' });
  const now = Date.now();
  await db.insertInto('t_svc_webhook').values({
    webhook_id: 'wh-1', team_id: TEAM, name: 'hook', url: 'http://192.0.2.1/', enabled: 1, events: '[]',
    sealed_secret: vault.seal('whsec-1', webhookContext('wh-1')), last_delivery: null, created_at: now, updated_at: now,
  }).execute();
  const recipe = { source: { kind: 'registry' as const, ref: 'registry.example/app:1', auth: AUTH }, withSvcCa: false, diskSizeMB: 0 };
  await db.insertInto('t_svc_template').values({
    template_id: 'tpl-1', alias: null, source_kind: 'registry', source_image_ref: 'registry.example/app:1', request_json: storedRecipe(recipe, 'tpl-1', vault),
    spec_hash: 'h', cpu_count: 1, memory_mb: 256, disk_size_mb: 0, with_cube_ca: 0, latest_job_id: null, artifact_id: null, image_info: null,
    status: 'READY', error: null, legacy: 0, layer_snapshot_id: null, start_cmd: null, ready_cmd: null, runtime: null, team_id: TEAM, public: 0, created_at: now, updated_at: now,
  }).execute();
}

/** What every reader of a sealed value gets under `vault`. */
async function readEverything(db: Kysely<Database>, vault: Vault) {
  const issuer = issuerOver(db, vault);
  await issuer.start();
  const hook = await db.selectFrom('t_svc_webhook').select('sealed_secret').where('webhook_id', '=', 'wh-1').executeTakeFirstOrThrow();
  const tpl = await db.selectFrom('t_svc_template').select('request_json').where('template_id', '=', 'tpl-1').executeTakeFirstOrThrow();
  return {
    kids: issuer.jwks().keys.map((k) => k.kid),
    secret: (await new SecretService(new SecretRepo(db), vault).resolve(TEAM, ['db-password'])).values['db-password'],
    webhook: vault.open(hook.sealed_secret, webhookContext('wh-1')),
    registry: (recipeOf(tpl.request_json!, 'tpl-1', vault).source as { auth?: typeof AUTH }).auth,
  };
}

for (const engine of availableTestDatabases()) {
  test(`vault rotation as documented: every sealed value moves to the new key at start, and the old key can go, on ${engine.driver}`, { skip: engine.skip }, async () => {
    const tdb = await engine.create!();
    const db = await openDatabase(tdb.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const k1 = newVaultKeyFile('k1');
      const k2 = newVaultKeyFile('k2');
      await sealEverything(db.kysely, new Vault(k1));
      const before = await readEverything(db.kysely, new Vault(k1));

      // Steps 1 and 2: k2 added as primary, the master restarted.
      const both: VaultKeyFile = { primary: 'k2', keys: { ...k1.keys, ...k2.keys } };
      const { logger, lines } = recording();
      const report = await resealStaleValues(db.kysely, new Vault(both), logger);
      assert.deepEqual(report, {
        resealed: { 'workload identity signing key': 1, 'webhook signature secret': 1, 'secret value (current version)': 1, 'template registry credentials': 1 },
        unopened: 0,
      });
      assert.ok(lines.some((l) => /sealed anew under the primary key/.test(String(l.msg))));
      assert.deepEqual((await resealStaleValues(db.kysely, new Vault(both), logger)).resealed, {}, 'a second start has nothing left to do');

      // Step 3: k1 dropped. Everything still opens, the issuer keeps its key.
      const after = await readEverything(db.kysely, new Vault(k2));
      assert.deepEqual(after, before);
      assert.deepEqual(after, { kids: before.kids, secret: 'hunter2', webhook: 'whsec-1', registry: AUTH });
    } finally {
      await db.close();
      await tdb.drop();
    }
  });
}

test('a value no key of the file opens is logged with its row and skipped; an identity key that does not open is replaced', async () => {
  const tdb = await availableTestDatabases()[0]!.create!();
  const db = await openDatabase(tdb.config);
  try {
    await migrate(db.kysely, db.driver, migrations);
    const lost = new Vault(newVaultKeyFile('k0'));
    await sealEverything(db.kysely, lost);
    const [oldKid] = (await db.kysely.selectFrom('t_svc_identity_key').select('kid').execute()).map((r) => r.kid);
    const current = new Vault(newVaultKeyFile('k2'));
    const { logger, lines } = recording();
    const report = await resealStaleValues(db.kysely, current, logger);
    assert.deepEqual(report, { resealed: {}, unopened: 4 });
    for (const id of [oldKid, 'wh-1', 'tpl-1']) {
      assert.ok(lines.some((l) => l.level === 50 && l.id === id && /vault key k0/.test(String(l.err))), `logged as an error with its row id: ${id}`);
    }
    const issuer = issuerOver(db.kysely, current, logger);
    await issuer.start();
    const kids = issuer.jwks().keys.map((k) => k.kid);
    assert.equal(kids.length, 1);
    assert.notEqual(kids[0], oldKid, 'a new signing key, the unopened one left out');
    assert.ok(issuer.mint({ teamId: 't', sandboxId: 's', audience: 'sts.amazonaws.com' }).token, 'the issuer signs');
    assert.ok(lines.some((l) => l.kid === oldKid && /left out of the issuer's keys/.test(String(l.msg))));
  } finally {
    await db.close();
    await tdb.drop();
  }
});
