import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { Secret, SecretNotFoundError } from 'e2b';
import { createHttpApp, randomId, silentLogger, type DatabaseConfig } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';
import { fillPlaceholders, placeholderRefs, SECRET_LIMITS, type WireSecret } from '@svc/contracts/secrets';
import { DEFAULT_TEAM_ID, TEAM_HEADER } from '@svc/contracts/teams';
import { openDatabase, type Db } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { newVaultKeyFile, Vault } from '../vault/vault.ts';
import { SecretRepo } from './repo.ts';
import { registerSecretRoutes } from './routes.ts';
import { SecretService } from './service.ts';

const ADMIN_TOKEN = 'egress-admin-token-for-tests';
/** Every value holds it: finding it nowhere in storage shows that no value is stored in the clear. */
const MARKER = `plain-${randomId(16)}`;
const secretValue = (s: string) => `${MARKER}-${s}`;
const newTeam = () => `team-${randomId(8)}`;
const WIRE_FIELDS = ['createdAt', 'currentVersion', 'metadata', 'name', 'secretID', 'updatedAt'];

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

async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, o: CallOpts = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(o.team ? { [TEAM_HEADER]: o.team } : {}), ...o.headers };
  const withBody = 'body' in o;
  if (withBody) headers['content-type'] = 'application/json';
  const res = await app.inject({ method, url, headers, ...(withBody ? { payload: JSON.stringify(o.body) } : {}) });
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined, headers: res.headers };
}

async function setup(config: DatabaseConfig) {
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

type Harness = Awaited<ReturnType<typeof setup>>;

async function create(h: Harness, team: string | undefined, body: Record<string, unknown>): Promise<WireSecret> {
  const r = await call(h.app, 'POST', '/secrets', { team, body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as WireSecret;
}

async function resolve(h: Harness, teamId: string, names: string[]) {
  const r = await call(h.app, 'POST', '/internal/v1/secrets/resolve', { headers: { [EGRESS_ADMIN_TOKEN_HEADER]: ADMIN_TOKEN }, body: { teamId, names } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { values: Record<string, string>; missing: string[] };
}

async function rowCounts(db: Db): Promise<[number, number]> {
  const secrets = await db.kysely.selectFrom('t_svc_secret').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const versions = await db.kysely.selectFrom('t_svc_secret_version').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return [Number(secrets.n), Number(versions.n)];
}

async function versionsOf(db: Db, secretId: string) {
  return db.kysely.selectFrom('t_svc_secret_version').selectAll().where('secret_id', '=', secretId).orderBy('version').execute();
}

const bytes = (n: number, ch = 'x') => ch.repeat(n);

for (const tdb of availableTestDatabases()) {
  test(`the secrets vault on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    try {
      await t.test('creates a secret (201, E2B\'s shape, no value), reads it by id and by name in any case; a taken name is 409', async () => {
        const team = newTeam();
        const created = await create(h, team, { name: 'OpenAI-Key', value: secretValue('openai'), metadata: { env: 'prod' } });
        assert.deepEqual(Object.keys(created).sort(), WIRE_FIELDS);
        assert.match(created.secretID, /^sec_[a-z0-9]{24}$/);
        assert.deepEqual([created.name, created.currentVersion, created.metadata], ['openai-key', 1, { env: 'prod' }]);
        assert.equal(new Date(created.createdAt).toISOString(), created.createdAt);
        assert.equal(created.updatedAt, created.createdAt);
        for (const ref of [created.secretID, 'openai-key', 'OPENAI-KEY', 'OpenAI-Key']) {
          const got = await call(h.app, 'GET', `/secrets/${ref}`, { team });
          assert.equal(got.status, 200, ref);
          assert.deepEqual(got.body, created);
        }
        const taken = await call(h.app, 'POST', '/secrets', { team, body: { name: 'openai-KEY', value: secretValue('again') } });
        assert.equal(taken.status, 409);
        assert.equal(taken.body.code, 409);
        assert.equal((await call(h.app, 'GET', '/secrets', { team })).body.length, 1);
        const bare = await create(h, team, { name: 'no-metadata', value: secretValue('bare'), metadata: null });
        assert.deepEqual(bare.metadata, {});
      });

      await t.test('a name of the full 128 characters is found by name (longer than the router\'s parameter cap)', async () => {
        const team = newTeam();
        const name = bytes(SECRET_LIMITS.nameMaxChars, 'n');
        const created = await create(h, team, { name, value: secretValue('long-name') });
        assert.equal((await call(h.app, 'GET', `/secrets/${name}`, { team })).body.secretID, created.secretID);
        assert.equal((await call(h.app, 'GET', `/secrets/${created.secretID}/extra`, { team })).status, 404);
      });

      await t.test('an update appends a version and makes it current; metadata changes only when given', async () => {
        const team = newTeam();
        const created = await create(h, team, { name: 'rotating', value: secretValue('v1'), metadata: { a: '1' } });
        const v2 = await call(h.app, 'POST', '/secrets/Rotating', { team, body: { value: secretValue('v2') } });
        assert.equal(v2.status, 200);
        assert.deepEqual([v2.body.secretID, v2.body.currentVersion, v2.body.metadata, v2.body.createdAt], [created.secretID, 2, { a: '1' }, created.createdAt]);
        assert.ok(v2.body.updatedAt >= created.updatedAt);
        const v3 = await call(h.app, 'POST', `/secrets/${created.secretID}`, { team, body: { value: secretValue('v3'), metadata: { b: '2' } } });
        assert.deepEqual([v3.body.currentVersion, v3.body.metadata], [3, { b: '2' }]);
        const v4 = await call(h.app, 'POST', '/secrets/rotating', { team, body: { value: secretValue('v4'), metadata: {} } });
        assert.deepEqual([v4.body.currentVersion, v4.body.metadata], [4, {}]);
        assert.deepEqual((await call(h.app, 'GET', '/secrets/rotating', { team })).body, v4.body);

        const versions = await versionsOf(h.db, created.secretID);
        assert.deepEqual(versions.map((v) => v.version), [1, 2, 3, 4]);
        versions.forEach((v) => assert.equal(h.vault.open(v.sealed_value, `${created.secretID}:${v.version}`), secretValue(`v${v.version}`)));
        assert.throws(() => h.vault.open(versions[0].sealed_value, `${created.secretID}:2`), /integrity/, 'a seal moved to another version does not open');
        assert.deepEqual((await resolve(h, team, ['rotating'])).values, { rotating: secretValue('v4') });

        // Updates at once each land on their own version.
        const together = await Promise.all([5, 6, 7, 8].map((n) => call(h.app, 'POST', '/secrets/rotating', { team, body: { value: secretValue(`c${n}`) } })));
        assert.deepEqual(together.map((r) => r.status), [200, 200, 200, 200]);
        assert.deepEqual(together.map((r) => r.body.currentVersion).sort(), [5, 6, 7, 8]);
        assert.deepEqual((await versionsOf(h.db, created.secretID)).map((v) => v.version), [1, 2, 3, 4, 5, 6, 7, 8]);
      });

      await t.test('lists a team\'s secrets oldest first, a page at a time, with X-Next-Token while more remain', async () => {
        const team = newTeam();
        const made: WireSecret[] = [];
        for (let i = 0; i < 5; i++) made.push(await create(h, team, { name: `page-${i}`, value: secretValue(`p${i}`) }));
        const expected = [...made].sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.secretID.localeCompare(b.secretID)).map((s) => s.secretID);

        const seen: string[] = [];
        let token: string | undefined;
        let pages = 0;
        do {
          const r = await call(h.app, 'GET', `/secrets?limit=2${token ? `&nextToken=${encodeURIComponent(token)}` : ''}`, { team });
          assert.equal(r.status, 200);
          assert.ok(r.body.length <= 2);
          seen.push(...r.body.map((s: WireSecret) => s.secretID));
          token = r.headers['x-next-token'] as string | undefined;
          pages++;
        } while (token);
        assert.equal(pages, 3);
        assert.deepEqual(seen, expected);

        const all = await call(h.app, 'GET', '/secrets', { team });
        assert.deepEqual(all.body.map((s: WireSecret) => s.secretID), expected);
        assert.equal(all.headers['x-next-token'], undefined);
        assert.equal((await call(h.app, 'GET', '/secrets?limit=5', { team })).headers['x-next-token'], undefined, 'no token when the page ends the list');
        assert.equal((await call(h.app, 'GET', '/secrets?limit=100', { team })).status, 200);
        for (const limit of ['0', '101', '-1', 'x', '1.5', '1e1']) {
          assert.equal((await call(h.app, 'GET', `/secrets?limit=${limit}`, { team })).status, 400, `limit=${limit}`);
        }
        for (const bad of ['garbage', Buffer.from('1:sec_short').toString('base64url')]) {
          assert.equal((await call(h.app, 'GET', `/secrets?nextToken=${bad}`, { team })).status, 400);
        }
      });

      await t.test('a delete removes the secret and every version (204); the name is free again', async () => {
        const team = newTeam();
        const doomed = await create(h, team, { name: 'doomed', value: secretValue('d1') });
        await call(h.app, 'POST', '/secrets/doomed', { team, body: { value: secretValue('d2') } });
        const del = await call(h.app, 'DELETE', '/secrets/DOOMED', { team });
        assert.equal(del.status, 204);
        assert.equal(del.body, undefined);
        assert.equal((await call(h.app, 'GET', `/secrets/${doomed.secretID}`, { team })).status, 404);
        assert.equal((await call(h.app, 'DELETE', `/secrets/${doomed.secretID}`, { team })).status, 404);
        assert.equal((await call(h.app, 'POST', '/secrets/doomed', { team, body: { value: secretValue('d3') } })).status, 404);
        assert.deepEqual(await versionsOf(h.db, doomed.secretID), []);
        const again = await create(h, team, { name: 'doomed', value: secretValue('d4') });
        assert.notEqual(again.secretID, doomed.secretID);
        assert.equal(again.currentVersion, 1);
        assert.deepEqual((await resolve(h, team, ['doomed'])).values, { doomed: secretValue('d4') });
      });

      await t.test('names and metadata at every limit are accepted', async () => {
        const team = newTeam();
        const metadata = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, bytes(1022)])); // 8 × 1024 = 8192 bytes
        const full = await create(h, team, { name: bytes(SECRET_LIMITS.nameMaxChars, 'a'), value: secretValue('full'), metadata });
        assert.deepEqual(full.metadata, metadata);
        const many = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`${i}`.padStart(128, 'k'), 'v']));
        assert.deepEqual((await create(h, team, { name: 'many-keys', value: 'x', metadata: many })).metadata, many);
        const wide = { k: bytes(1024, 'v'), ['é'.repeat(64)]: 'two bytes a character' };
        assert.deepEqual((await create(h, team, { name: 'wide', value: '€', metadata: wide })).metadata, wide);
        assert.deepEqual((await resolve(h, team, ['wide'])).values, { wide: '€' });
        const probing = { ['__proto__']: 'a key like any other', constructor: 'too' };
        const probed = await create(h, team, { name: '__proto__', value: secretValue('proto'), metadata: probing });
        assert.deepEqual([probed.name, Object.keys(probed.metadata).sort(), probed.metadata.constructor], ['__proto__', ['__proto__', 'constructor'], 'too']);
        assert.deepEqual(Object.keys((await resolve(h, team, ['__proto__'])).values), ['__proto__']);
      });

      // A sealed 64 KiB value is about 87,000 characters: past MySQL's text, hence the longtext column.
      await t.test('a value of the full 64 KiB is stored, updated and resolved', async () => {
        const team = newTeam();
        const big = secretValue(bytes(SECRET_LIMITS.valueMaxBytes - MARKER.length - 1));
        assert.equal(Buffer.byteLength(big), SECRET_LIMITS.valueMaxBytes);
        await create(h, team, { name: 'big', value: big });
        const multiByte = MARKER + 'é'.repeat((SECRET_LIMITS.valueMaxBytes - MARKER.length) / 2);
        assert.equal(Buffer.byteLength(multiByte), SECRET_LIMITS.valueMaxBytes);
        assert.equal((await call(h.app, 'POST', '/secrets/big', { team, body: { value: multiByte } })).status, 200);
        assert.deepEqual((await resolve(h, team, ['big'])).values, { big: multiByte });
      });

      await t.test('bad inputs answer 400, store nothing and never quote the value', async () => {
        const team = newTeam();
        const existing = await create(h, team, { name: 'existing', value: secretValue('keep') });
        const before = await rowCounts(h.db);
        const ok = { name: 'fine', value: secretValue('fine') };
        const badCreates: Array<[string, unknown]> = [
          ['empty name', { ...ok, name: '' }],
          ['129-character name', { ...ok, name: bytes(129, 'a') }],
          ['sec_ name', { ...ok, name: 'sec_mine' }],
          ['SEC_ name', { ...ok, name: 'SEC_mine' }],
          ['an id as name', { ...ok, name: existing.secretID }],
          ['{ in name', { ...ok, name: 'a{b' }],
          ['} in name', { ...ok, name: 'a}b' }],
          ['placeholder as name', { ...ok, name: '${e2b.secrets.x}' }],
          ['space in name', { ...ok, name: 'a b' }],
          ['slash in name', { ...ok, name: 'a/b' }],
          ['non-ASCII name', { ...ok, name: 'ключ' }],
          ['numeric name', { ...ok, name: 42 }],
          ['null name', { ...ok, name: null }],
          ['no name', { value: ok.value }],
          ['empty value', { ...ok, value: '' }],
          ['value over 64 KiB', { ...ok, value: secretValue(bytes(SECRET_LIMITS.valueMaxBytes)) }],
          ['value over 64 KiB in bytes, not characters', { ...ok, value: MARKER + 'é'.repeat(SECRET_LIMITS.valueMaxBytes / 2) }],
          ['value with a lone surrogate', { ...ok, value: `${MARKER}\ud800` }],
          ['numeric value', { ...ok, value: 42 }],
          ['no value', { name: ok.name }],
          ['33 metadata entries', { ...ok, metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }],
          ['129-byte metadata key', { ...ok, metadata: { [bytes(129, 'k')]: 'v' } }],
          ['metadata key over 128 bytes in UTF-8', { ...ok, metadata: { ['é'.repeat(65)]: 'v' } }],
          ['empty metadata key', { ...ok, metadata: { '': 'v' } }],
          ['1025-byte metadata value', { ...ok, metadata: { k: bytes(1025) } }],
          ['metadata over 8192 bytes in all', { ...ok, metadata: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, bytes(i === 0 ? 1023 : 1022)])) }],
          ['numeric metadata value', { ...ok, metadata: { k: 1 } }],
          ['null metadata value', { ...ok, metadata: { k: null } }],
          ['object metadata value', { ...ok, metadata: { k: {} } }],
          ['boolean metadata value', { ...ok, metadata: { k: true } }],
          ['string metadata', { ...ok, metadata: 'k=v' }],
          ['list metadata', { ...ok, metadata: ['k'] }],
          ['unknown field', { ...ok, extra: 1 }],
          ['secretID field', { ...ok, secretID: 'sec_x' }],
          ['a list body', [ok]],
          ['a string body', 'fine'],
          ['a number body', 42],
          ['a null body', null],
        ];
        for (const [what, body] of badCreates) {
          const r = await call(h.app, 'POST', '/secrets', { team, body });
          assert.equal(r.status, 400, `${what}: ${JSON.stringify(r.body)}`);
          assert.equal(r.body.code, 400, what);
          assert.ok(!r.body.message.includes(MARKER), `${what}: the error quotes the value`);
        }
        assert.equal((await call(h.app, 'POST', '/secrets', { team })).status, 400, 'no body');

        const badUpdates: Array<[string, unknown]> = [
          ['no value', {}],
          ['only metadata', { metadata: { k: 'v' } }],
          ['empty value', { value: '' }],
          ['numeric value', { value: 1 }],
          ['value over 64 KiB', { value: secretValue(bytes(SECRET_LIMITS.valueMaxBytes)) }],
          ['a name (not updatable)', { value: secretValue('x'), name: 'renamed' }],
          ['unknown field', { value: secretValue('x'), currentVersion: 7 }],
          ['numeric metadata value', { value: secretValue('x'), metadata: { k: 1 } }],
          ['33 metadata entries', { value: secretValue('x'), metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }],
          ['a list body', [{ value: secretValue('x') }]],
          ['a string body', secretValue('x')],
          ['a null body', null],
        ];
        for (const [what, body] of badUpdates) {
          const r = await call(h.app, 'POST', '/secrets/existing', { team, body });
          assert.equal(r.status, 400, `update, ${what}: ${JSON.stringify(r.body)}`);
          assert.ok(!r.body.message.includes(MARKER), `update, ${what}: the error quotes the value`);
        }
        assert.equal((await call(h.app, 'POST', '/secrets/existing', { team })).status, 400, 'update without a body');

        assert.deepEqual(await rowCounts(h.db), before, 'nothing stored');
        assert.equal((await call(h.app, 'GET', '/secrets/existing', { team })).body.currentVersion, 1);
        assert.equal((await call(h.app, 'GET', '/secrets/fine', { team })).status, 404);
      });

      await t.test('a team cannot see, update or delete another team\'s secrets: 404 as for a missing one', async () => {
        const [a, b] = [newTeam(), newTeam()];
        const aShared = await create(h, a, { name: 'shared', value: secretValue('a-shared') });
        const aOnly = await create(h, a, { name: 'only-a', value: secretValue('a-only') });
        const bShared = await create(h, b, { name: 'shared', value: secretValue('b-shared') });
        assert.notEqual(aShared.secretID, bShared.secretID);

        const missing = await call(h.app, 'GET', `/secrets/sec_${randomId(24)}`, { team: b });
        assert.equal(missing.status, 404);
        for (const ref of [aOnly.secretID, 'only-a', aShared.secretID]) {
          for (const [method, body] of [['GET', undefined], ['POST', { value: secretValue('stolen') }], ['DELETE', undefined]] as const) {
            const r = await call(h.app, method, `/secrets/${ref}`, { team: b, ...(body ? { body } : {}) });
            assert.equal(r.status, 404, `${method} ${ref}`);
            assert.equal(r.body.code, missing.body.code);
            assert.deepEqual(Object.keys(r.body).sort(), Object.keys(missing.body).sort());
          }
        }
        assert.deepEqual((await call(h.app, 'GET', '/secrets/shared', { team: b })).body, bShared);
        assert.deepEqual((await call(h.app, 'GET', `/secrets/${aOnly.secretID}`, { team: a })).body, aOnly, 'untouched');
        // Two made in the same millisecond list in id order: compare the sets.
        assert.deepEqual((await call(h.app, 'GET', '/secrets', { team: a })).body.map((s: WireSecret) => s.secretID).sort(), [aShared.secretID, aOnly.secretID].sort());
        assert.deepEqual((await call(h.app, 'GET', '/secrets', { team: b })).body.map((s: WireSecret) => s.secretID), [bShared.secretID]);
        assert.deepEqual((await resolve(h, a, ['shared'])).values, { shared: secretValue('a-shared') });

        // The operator (no team header) acts as the default team.
        const operators = await create(h, undefined, { name: 'operator-key', value: secretValue('op') });
        assert.equal((await call(h.app, 'GET', '/secrets/operator-key', { team: DEFAULT_TEAM_ID })).body.secretID, operators.secretID);
        assert.equal((await call(h.app, 'GET', '/secrets/operator-key', { team: a })).status, 404);
        assert.ok(!(await call(h.app, 'GET', '/secrets')).body.some((s: WireSecret) => s.secretID === aShared.secretID));
      });

      await t.test('the resolve route: the egress admin token guards it; it gives current values, and other teams\' names as missing', async () => {
        const [team, other] = [newTeam(), newTeam()];
        await create(h, team, { name: 'api-key', value: secretValue('old') });
        await call(h.app, 'POST', '/secrets/api-key', { team, body: { value: secretValue('current') } });
        await create(h, other, { name: 'theirs', value: secretValue('theirs') });
        const path = '/internal/v1/secrets/resolve';
        const body = { teamId: team, names: ['api-key'] };

        assert.equal((await call(h.tokenless, 'POST', path, { body, headers: { [EGRESS_ADMIN_TOKEN_HEADER]: ADMIN_TOKEN } })).status, 503);
        assert.equal((await call(h.app, 'POST', path, { body })).status, 403);
        assert.equal((await call(h.app, 'POST', path, { body, headers: { [EGRESS_ADMIN_TOKEN_HEADER]: `${ADMIN_TOKEN}x` } })).status, 403);
        assert.equal((await call(h.app, 'POST', path, { body, headers: { [EGRESS_ADMIN_TOKEN_HEADER]: '' } })).status, 403);

        const r = await resolve(h, team, ['api-key', 'API-Key', 'theirs', 'nope', '__proto__', 'constructor', 'not a name', 'api-key']);
        assert.deepEqual(r, {
          values: { 'api-key': secretValue('current'), 'API-Key': secretValue('current') },
          missing: ['theirs', 'nope', '__proto__', 'constructor', 'not a name'],
        });
        assert.deepEqual(await resolve(h, other, ['theirs', 'api-key']), { values: { theirs: secretValue('theirs') }, missing: ['api-key'] });
        assert.deepEqual(await resolve(h, team, []), { values: {}, missing: [] });
        const sixtyFour = Array.from({ length: SECRET_LIMITS.resolveMaxNames }, (_, i) => `n${i}`);
        assert.equal((await resolve(h, team, sixtyFour)).missing.length, 64);

        const headers = { [EGRESS_ADMIN_TOKEN_HEADER]: ADMIN_TOKEN };
        for (const bad of [{ teamId: team, names: [...sixtyFour, 'one-more'] }, { teamId: team }, { names: [] }, { teamId: '', names: [] }, { teamId: team, names: 'api-key' }, { teamId: team, names: [1] }, { teamId: team, names: [], extra: true }, null, []]) {
          assert.equal((await call(h.app, 'POST', path, { body: bad, headers })).status, 400, JSON.stringify(bad));
        }
        assert.deepEqual(await h.service.missing(team, ['api-key', 'API-KEY', 'theirs', 'not a name', 'theirs']), ['theirs', 'not a name']);
      });

      await t.test('the e2b SDK\'s Secret module works against these routes', async () => {
        const sdkApp = createHttpApp({ logger: silentLogger() });
        registerSecretRoutes(sdkApp, h.service, ADMIN_TOKEN);
        await sdkApp.listen({ host: '127.0.0.1', port: 0 });
        const address = sdkApp.server.address();
        const opts = { apiKey: `e2b_${'0'.repeat(40)}`, apiUrl: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, requestTimeoutMs: 10_000 };
        try {
          const prefix = `sdk-${randomId(6)}`;
          const info = await Secret.create(`${prefix}-A`, secretValue('sdk1'), { ...opts, metadata: { by: 'sdk' } });
          assert.deepEqual([info.name, info.version, info.metadata], [`${prefix}-a`, 1, { by: 'sdk' }]);
          assert.ok(info.createdAt instanceof Date && !Number.isNaN(info.createdAt.getTime()));
          assert.equal((await Secret.update(info.secretId, secretValue('sdk2'), opts)).version, 2);
          assert.equal((await Secret.getInfo(`${prefix}-a`, opts)).version, 2);
          assert.equal(await Secret.exists(`${prefix}-missing`, opts), false);
          await assert.rejects(Secret.getInfo(`${prefix}-missing`, opts), SecretNotFoundError);
          await assert.rejects(Secret.update(`${prefix}-missing`, 'x', opts), SecretNotFoundError);
          for (let i = 0; i < 3; i++) await Secret.create(`${prefix}-${i}`, secretValue(`sdk-${i}`), opts);
          const paginator = Secret.list({ ...opts, limit: 2 });
          const names: string[] = [];
          while (paginator.hasNext) names.push(...(await paginator.nextItems()).map((s) => s.name));
          assert.deepEqual(names.filter((n) => n.startsWith(prefix)).sort(), [`${prefix}-0`, `${prefix}-1`, `${prefix}-2`, `${prefix}-a`]);
          assert.equal(await Secret.destroy(info.secretId, opts), true);
          assert.equal(await Secret.destroy(info.secretId, opts), false);
          assert.deepEqual(placeholderRefs(`Bearer ${Secret.fill(`${prefix}-0`)}`).secrets, [`${prefix}-0`]);
        } finally {
          await sdkApp.close();
        }
      });

      await t.test('no value is stored in the clear', async () => {
        const secrets = await h.db.kysely.selectFrom('t_svc_secret').selectAll().execute();
        const versions = await h.db.kysely.selectFrom('t_svc_secret_version').selectAll().execute();
        assert.ok(versions.length > 20);
        assert.ok(!JSON.stringify([secrets, versions]).includes(MARKER));
        for (const v of versions) assert.match(v.sealed_value, /^v1:/);
        if (made.config.driver === 'sqlite') {
          // The database file and its write-ahead log, as a disk image or a backup would hold them.
          const files = [made.config.path, `${made.config.path}-wal`].filter((f) => existsSync(f));
          assert.ok(files.length > 0);
          for (const f of files) assert.ok(!readFileSync(f).includes(MARKER), `${f} holds a value in the clear`);
        }
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}

test('placeholderRefs finds secret and token references, each once, in order', () => {
  assert.deepEqual(placeholderRefs('Bearer ${e2b.secrets.api-key}; ${e2b.identity.tokens.aws} ${e2b.secrets.API-KEY} ${e2b.secrets.api-key}'), {
    secrets: ['api-key', 'API-KEY'],
    tokens: ['aws'],
  });
  assert.deepEqual(placeholderRefs('no placeholders, ${HOME}, $ {e2b.secrets.x}, ${E2B.secrets.x}, ${e2b.secret.x}'), { secrets: [], tokens: [] });
});

test('a placeholder\'s name is everything up to the next }; without a } or a name it is text', () => {
  assert.deepEqual(placeholderRefs('${e2b.secrets.a{b}c}'), { secrets: ['a{b'], tokens: [] });
  assert.deepEqual(placeholderRefs('${e2b.secrets.}${e2b.identity.tokens.}'), { secrets: [], tokens: [] });
  assert.deepEqual(placeholderRefs('${e2b.secrets.unclosed'), { secrets: [], tokens: [] });
  assert.deepEqual(placeholderRefs('${${e2b.secrets.inner}}'), { secrets: ['inner'], tokens: [] });
});

test('fillPlaceholders replaces every placeholder and leaves other text as it is', () => {
  const lookup = { secret: (n: string) => `S(${n})`, token: (n: string) => `T(${n})` };
  assert.equal(fillPlaceholders('Bearer ${e2b.secrets.k}', lookup), 'Bearer S(k)');
  assert.equal(fillPlaceholders('${e2b.secrets.a}${e2b.identity.tokens.b}-${e2b.secrets.a}', lookup), 'S(a)T(b)-S(a)');
  assert.equal(fillPlaceholders('$${e2b.secrets.a}}', lookup), '$S(a)}');
  assert.equal(fillPlaceholders('${${e2b.secrets.a}', lookup), '${S(a)');
  for (const text of ['', 'plain', '${HOME}', '${', '${e2b.secrets.', '${e2b.secrets.}', '${e2b.secrets.x', 'a } b { c']) {
    assert.equal(fillPlaceholders(text, lookup), text);
  }
});

test('fillPlaceholders does not expand a placeholder inside a substituted value, and a failing lookup throws', () => {
  const asked: string[] = [];
  const lookup = {
    secret: (n: string) => { asked.push(n); if (n === 'missing') throw new Error('no such secret'); return '${e2b.secrets.other}'; },
    token: () => '${e2b.identity.tokens.t}',
  };
  assert.equal(fillPlaceholders('x=${e2b.secrets.a} y=${e2b.identity.tokens.b}', lookup), 'x=${e2b.secrets.other} y=${e2b.identity.tokens.t}');
  assert.deepEqual(asked, ['a']);
  assert.throws(() => fillPlaceholders('${e2b.secrets.missing}', lookup), /no such secret/);
});
