/** The secrets vault refuses bad input, keeps teams apart, guards the resolve route, serves E2B's SDK, and stores no value in the clear. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Secret, SecretNotFoundError } from 'e2b';
import { createHttpApp, randomId, silentLogger } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';
import { placeholderRefs, SECRET_LIMITS, type WireSecret } from '@svc/contracts/secrets';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { availableTestDatabases } from '../db/test-databases.ts';
import { registerSecretRoutes } from './routes.ts';
import { ADMIN_TOKEN, bytes, call, create, MARKER, newTeam, resolve, rowCounts, secretValue, setup, assertNothingInTheClear } from './secrets-test-support.ts';

for (const tdb of availableTestDatabases()) {
  test(`the secrets vault's guards on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    try {
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

      await t.test('no value is stored in the clear', () => assertNothingInTheClear(h, made.config));
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
