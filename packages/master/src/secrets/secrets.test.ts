/** The secrets vault's routes: create, read, update, list, delete, at their limits. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SECRET_LIMITS, type WireSecret } from '@svc/contracts/secrets';
import { availableTestDatabases } from '../db/test-databases.ts';
import { bytes, call, create, MARKER, newTeam, resolve, secretValue, setup, versionsOf, WIRE_FIELDS, assertNothingInTheClear } from './secrets-test-support.ts';

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

      await t.test('no value is stored in the clear', () => assertNothingInTheClear(h, made.config));
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
