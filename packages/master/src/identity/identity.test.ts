import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import Fastify from 'fastify';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { newVaultKeyFile, Vault } from '../vault/vault.ts';
import type { JwkSet } from '@svc/contracts/identity';
import { base64url, publicJwk, sign, verifyJwt, type JwtHeader } from './jwt.ts';
import { RETIRED_KEY_GRACE_MS, WorkloadIdentityIssuer, type WorkloadIdentityIssuerOptions } from './issuer.ts';
import { DbSigningKeyStore, MemorySigningKeyStore, type SigningKeyStore } from './key-store.ts';
import { registerIdentityRoutes } from './routes.ts';

const ISSUER = 'https://oidc.svc.example.com';
const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

function fakeClock(start = T0) {
  const clock = { t: start, now: () => clock.t };
  return clock;
}

function newIssuer(store: SigningKeyStore, now: () => number, over: Partial<WorkloadIdentityIssuerOptions> = {}) {
  return new WorkloadIdentityIssuer({ store, issuerUrl: ISSUER, trustDomain: 'svc.example.com', now, ...over });
}

function headerOf(token: string): JwtHeader {
  return JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString()) as JwtHeader;
}

function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as Record<string, unknown>;
}

const kids = (jwks: JwkSet) => jwks.keys.map((k) => k.kid);

test('jwt: ES256 sign and verify', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicJwk(privateKey);
  const jwks: JwkSet = { keys: [jwk] };
  const nowSec = Math.floor(T0 / 1000);
  const claims = { iss: ISSUER, aud: 'sts.amazonaws.com', sub: 's', iat: nowSec, nbf: nowSec, exp: nowSec + 600 };
  const token = sign({ alg: 'ES256', typ: 'JWT', kid: jwk.kid }, claims, privateKey);
  const opts = { audience: 'sts.amazonaws.com', issuer: ISSUER, now: T0 };

  await t.test('publicJwk is the public P-256 key, its kid the RFC 7638 thumbprint', () => {
    assert.deepEqual(Object.keys(jwk).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x', 'y']);
    assert.deepEqual([jwk.kty, jwk.crv, jwk.alg, jwk.use], ['EC', 'P-256', 'ES256', 'sig']);
    const canonical = `{"crv":"P-256","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`;
    assert.equal(jwk.kid, createHash('sha256').update(canonical).digest('base64url'));
    assert.deepEqual(publicJwk(privateKey), jwk, 'the same key, the same kid');
    const { privateKey: rsa } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    assert.throws(() => publicJwk(rsa), /P-256/);
  });

  await t.test('round trip: the claims come back', () => {
    assert.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    assert.deepEqual(verifyJwt(token, jwks, opts), claims);
    const multi = sign({ alg: 'ES256', kid: jwk.kid }, { ...claims, aud: ['other', 'sts.amazonaws.com'] }, privateKey);
    assert.deepEqual(verifyJwt(multi, jwks, opts).aud, ['other', 'sts.amazonaws.com'], 'an aud array containing the audience');
  });

  await t.test('refused: wrong audience, wrong issuer, expired, not yet valid, unknown kid, tampered, alg none, bad shape', () => {
    assert.throws(() => verifyJwt(token, jwks, { ...opts, audience: 'sts.amazonaws.co' }), /audience/);
    assert.throws(() => verifyJwt(token, jwks, { ...opts, issuer: `${ISSUER}/` }), /issuer/);
    assert.doesNotThrow(() => verifyJwt(token, jwks, { ...opts, now: T0 + 660_000 }), 'within the 60 s skew');
    assert.throws(() => verifyJwt(token, jwks, { ...opts, now: T0 + 661_000 }), /expired/);
    assert.throws(() => verifyJwt(token, jwks, { ...opts, now: T0 - 61_000 }), /not valid before/);
    const { privateKey: other } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    assert.throws(() => verifyJwt(token, { keys: [publicJwk(other)] }, opts), /not in the JWKS/);
    const forged = sign({ alg: 'ES256', kid: jwk.kid }, claims, other);
    assert.throws(() => verifyJwt(forged, jwks, opts), /signature/, 'signed by another key under this kid');
    const [h, , s] = token.split('.');
    const tampered = `${h}.${base64url(JSON.stringify({ ...claims, sub: 'someone-else' }))}.${s}`;
    assert.throws(() => verifyJwt(tampered, jwks, opts), /signature/);
    const none = `${base64url(JSON.stringify({ alg: 'none', kid: jwk.kid }))}.${base64url(JSON.stringify(claims))}.`;
    assert.throws(() => verifyJwt(none, jwks, opts), /refused algorithm "none"/);
    const hs256 = `${base64url(JSON.stringify({ alg: 'HS256', kid: jwk.kid }))}.${token.split('.')[1]}.${s}`;
    assert.throws(() => verifyJwt(hs256, jwks, opts), /refused algorithm "HS256"/);
    const noExp = sign({ alg: 'ES256', kid: jwk.kid }, { ...claims, exp: undefined }, privateKey);
    assert.throws(() => verifyJwt(noExp, jwks, opts), /no numeric exp/);
    assert.throws(() => verifyJwt('a.b', jwks, opts), /three/);
    assert.throws(() => verifyJwt(`${h}.!!!.${s}`, jwks, opts), /signature|JSON/);
  });
});

test('issuer: mint, claims and limits', async (t) => {
  const clock = fakeClock();
  const issuer = newIssuer(new MemorySigningKeyStore(), clock.now);
  assert.throws(() => issuer.mint({ teamId: 't', sandboxId: 's', audience: 'a' }), /no active signing key/);
  await issuer.start();
  const nowSec = T0 / 1000;
  const verify = (token: string, audience = 'sts.amazonaws.com') => verifyJwt(token, issuer.jwks(), { audience, issuer: ISSUER, now: clock.t });

  await t.test('a minted token verifies against the published JWKS, with the SPIFFE sub and the audience as given', () => {
    const { token, expiresAt } = issuer.mint({ teamId: 'team-1', sandboxId: 'sbx_42', audience: 'sts.amazonaws.com' });
    const header = headerOf(token);
    assert.deepEqual(header, { alg: 'ES256', typ: 'JWT', kid: issuer.jwks().keys[0].kid });
    const claims = verify(token);
    assert.equal(claims.sub, 'spiffe://svc.example.com/team/team-1/sandbox/sbx_42');
    assert.equal(claims.iss, ISSUER);
    assert.equal(claims.aud, 'sts.amazonaws.com');
    assert.deepEqual([claims.iat, claims.nbf, claims.exp, expiresAt], [nowSec, nowSec, nowSec + 3600, nowSec + 3600]);
    assert.match(String(claims.jti), /^[0-9a-f-]{36}$/);
    assert.notEqual(claimsOf(issuer.mint({ teamId: 't', sandboxId: 's', audience: 'a' }).token).jti, claims.jti, 'jti differs per token');
    assert.throws(() => verify(token, 'https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q'), /audience/);
    const gcpAud = '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q';
    assert.equal(verify(issuer.mint({ teamId: 't', sandboxId: 's', audience: gcpAud }).token, gcpAud).aud, gcpAud);
  });

  await t.test('ttl: as asked, capped at 3600 s; the token is refused after it', () => {
    assert.equal(issuer.mint({ teamId: 't', sandboxId: 's', audience: 'sts.amazonaws.com', ttlSec: 60 }).expiresAt, nowSec + 60);
    const capped = issuer.mint({ teamId: 't', sandboxId: 's', audience: 'sts.amazonaws.com', ttlSec: 86_400 });
    assert.equal(capped.expiresAt, nowSec + 3600);
    assert.equal(claimsOf(capped.token).exp, nowSec + 3600);
    assert.throws(() => verifyJwt(capped.token, issuer.jwks(), { audience: 'sts.amazonaws.com', issuer: ISSUER, now: T0 + (3600 + 61) * 1000 }), /expired/);
  });

  await t.test('refused: empty audience, ttl <= 0 or fractional, ids that would break the SPIFFE path', () => {
    const base = { teamId: 't', sandboxId: 's', audience: 'a' };
    assert.throws(() => issuer.mint({ ...base, audience: '' }), /non-empty audience/);
    assert.throws(() => issuer.mint({ ...base, ttlSec: 0 }), /ttlSec/);
    assert.throws(() => issuer.mint({ ...base, ttlSec: -5 }), /ttlSec/);
    assert.throws(() => issuer.mint({ ...base, ttlSec: 1.5 }), /ttlSec/);
    assert.throws(() => issuer.mint({ ...base, teamId: 'a/sandbox/b' }), /teamId/);
    assert.throws(() => issuer.mint({ ...base, sandboxId: '..' }), /sandboxId/);
    assert.throws(() => issuer.mint({ ...base, sandboxId: '' }), /sandboxId/);
  });

  await t.test('bad options are refused at construction', () => {
    const store = new MemorySigningKeyStore();
    assert.throws(() => newIssuer(store, clock.now, { issuerUrl: `${ISSUER}/` }), /slash/);
    assert.throws(() => newIssuer(store, clock.now, { issuerUrl: 'oidc.example.com' }), /not a URL/);
    assert.throws(() => newIssuer(store, clock.now, { issuerUrl: `${ISSUER}?x=1` }), /query/);
    assert.throws(() => newIssuer(store, clock.now, { trustDomain: 'Svc/x' }), /trust domain/);
    assert.throws(() => newIssuer(store, clock.now, { prePublishMs: 48 * HOUR }), /prePublishMs/);
  });

  await t.test('the discovery document', () => {
    assert.deepEqual(issuer.openidConfiguration(), {
      issuer: ISSUER,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
      response_types_supported: ['id_token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
      claims_supported: ['sub', 'aud', 'exp', 'iat', 'iss', 'nbf', 'jti'],
    });
  });

  await t.test('mint rate: 10,000 tokens', (t2) => {
    const n = 10_000;
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) issuer.mint({ teamId: 'team-1', sandboxId: `sbx-${i}`, audience: 'sts.amazonaws.com' });
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const rate = Math.round(n / seconds);
    t2.diagnostic(`${rate} tokens/s (${n} in ${seconds.toFixed(3)} s)`);
    assert.ok(rate > 1000, `minting ${rate} tokens/s, expected well above 1000`);
  });
});

test('issuer: key rotation with overlap', async (t) => {
  const clock = fakeClock();
  const store = new MemorySigningKeyStore();
  const issuer = newIssuer(store, clock.now);
  await issuer.start();
  const [first] = kids(issuer.jwks());
  const aud = 'sts.amazonaws.com';
  const kidOfMint = () => headerOf(issuer.mint({ teamId: 't', sandboxId: 's', audience: aud }).token).kid;
  const verifyAt = (token: string, at: number) => verifyJwt(token, issuer.jwks(), { audience: aud, issuer: ISSUER, now: at });

  await t.test('start makes one key, active at once, and only one however often it runs', async () => {
    assert.equal(kids(issuer.jwks()).length, 1);
    assert.equal(kidOfMint(), first);
    await issuer.start();
    await issuer.rotateIfDue();
    assert.deepEqual(kids(issuer.jwks()), [first]);
    assert.equal((await store.list()).length, 1);
  });

  let second = '';
  await t.test('the next key is published an hour before it signs', async () => {
    clock.t = T0 + 23 * HOUR - 1;
    await issuer.rotateIfDue();
    assert.deepEqual(kids(issuer.jwks()), [first], 'not yet due');
    clock.t = T0 + 23 * HOUR;
    await issuer.rotateIfDue();
    const published = kids(issuer.jwks());
    assert.equal(published.length, 2);
    second = published.find((k) => k !== first)!;
    assert.equal(kidOfMint(), first, 'published, not used yet');
    clock.t = T0 + 24 * HOUR - 1;
    assert.equal(kidOfMint(), first);
    await issuer.rotateIfDue();
    assert.equal((await store.list()).length, 2, 'no third key while the next one waits');
  });

  await t.test('the new key signs from its activation on, without waiting for rotateIfDue; the old one stays published while its tokens live', async () => {
    clock.t = T0 + 24 * HOUR - 1000;
    const lastOld = issuer.mint({ teamId: 't', sandboxId: 's', audience: aud }).token;
    assert.equal(headerOf(lastOld).kid, first);
    clock.t = T0 + 24 * HOUR;
    assert.equal(kidOfMint(), second);
    assert.deepEqual(kids(issuer.jwks()).sort(), [first, second].sort());

    const keptUntil = T0 + 24 * HOUR + 3600_000 + RETIRED_KEY_GRACE_MS;
    clock.t = keptUntil - 1;
    await issuer.rotateIfDue();
    assert.ok(kids(issuer.jwks()).includes(first), 'kept until every token it signed has expired');
    assert.doesNotThrow(() => verifyAt(lastOld, T0 + 24 * HOUR + 3599_000), 'its last token verifies until its exp');
    clock.t = keptUntil;
    await issuer.rotateIfDue();
    assert.deepEqual(kids(issuer.jwks()), [second], 'then unpublished');
    assert.deepEqual((await store.list()).map((k) => k.kid), [second], 'and removed from the store');
    assert.throws(() => verifyAt(lastOld, clock.t), /not in the JWKS/);
  });

  await t.test('a late rotation (masters were down) still pre-publishes the next key for a full hour', async () => {
    clock.t = T0 + 24 * HOUR + 72 * HOUR;
    await issuer.rotateIfDue();
    const third = kids(issuer.jwks()).find((k) => k !== second)!;
    assert.ok(third);
    assert.equal(kidOfMint(), second, 'the overdue key keeps signing while the next one is published');
    clock.t += HOUR - 1;
    assert.equal(kidOfMint(), second);
    clock.t += 1;
    assert.equal(kidOfMint(), third);
  });
});

test('issuer: masters sharing one store agree', async (t) => {
  const clock = fakeClock();
  const store = new MemorySigningKeyStore();
  const [a, b] = [newIssuer(store, clock.now), newIssuer(store, clock.now)];
  const kidOf = (i: WorkloadIdentityIssuer) => headerOf(i.mint({ teamId: 't', sandboxId: 's', audience: 'x' }).token).kid;

  await t.test('the second master to start uses the first one\'s key', async () => {
    await a.start();
    await b.start();
    assert.equal((await store.list()).length, 1);
    assert.equal(kidOf(a), kidOf(b));
    assert.deepEqual(a.jwks(), b.jwks());
  });

  await t.test('rotating at the same moment, both may add a key: they settle on the same one, and each publishes both', async () => {
    clock.t = T0 + 23 * HOUR;
    await Promise.all([a.rotateIfDue(), b.rotateIfDue()]);
    await Promise.all([a.rotateIfDue(), b.rotateIfDue()]);
    const stored = (await store.list()).length;
    assert.ok(stored === 2 || stored === 3, `one or two next keys (${stored - 1})`);
    assert.deepEqual(kids(a.jwks()).sort(), kids(b.jwks()).sort());
    assert.equal(kids(a.jwks()).length, stored);
    const before = kidOf(a);
    assert.equal(kidOf(b), before);
    clock.t = T0 + 24 * HOUR;
    assert.equal(kidOf(a), kidOf(b));
    assert.notEqual(kidOf(a), before);
    await Promise.all([a.rotateIfDue(), b.rotateIfDue()]);
    assert.equal((await store.list()).length, stored, 'no more keys until the next rotation');
  });

  await t.test('a key one master removed is gone from the other\'s JWKS too', async () => {
    clock.t = T0 + 25 * HOUR + RETIRED_KEY_GRACE_MS;
    await a.rotateIfDue();
    assert.equal((await store.list()).length, 1, 'only the active key is left');
    assert.deepEqual(kids(b.jwks()), kids(a.jwks()), 'expired keys leave the JWKS by time, before the reload');
    await b.rotateIfDue();
    assert.deepEqual(kids(b.jwks()), kids(a.jwks()));
    assert.equal(kidOf(a), kidOf(b));
  });

  await t.test('two masters starting on an empty store at once settle on one key', async () => {
    const shared = new MemorySigningKeyStore();
    const [c, d] = [newIssuer(shared, clock.now), newIssuer(shared, clock.now)];
    await Promise.all([c.start(), d.start()]);
    await Promise.all([c.rotateIfDue(), d.rotateIfDue()]);
    assert.equal(kidOf(c), kidOf(d));
    assert.deepEqual(c.jwks(), d.jwks());
  });
});

test('routes: discovery and JWKS, cacheable', async () => {
  const issuer = newIssuer(new MemorySigningKeyStore(), Date.now);
  await issuer.start();
  const app = Fastify();
  registerIdentityRoutes(app, issuer);
  try {
    const config = await app.inject({ method: 'GET', url: '/.well-known/openid-configuration' });
    assert.equal(config.statusCode, 200);
    assert.equal(config.headers['cache-control'], 'public, max-age=300');
    assert.match(String(config.headers['content-type']), /^application\/json/);
    assert.deepEqual(config.json(), issuer.openidConfiguration());
    const jwks = await app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    assert.equal(jwks.statusCode, 200);
    assert.equal(jwks.headers['cache-control'], 'public, max-age=300');
    const { token } = issuer.mint({ teamId: 't', sandboxId: 's', audience: 'sts.amazonaws.com' });
    assert.equal(verifyJwt(token, jwks.json() as JwkSet, { audience: 'sts.amazonaws.com', issuer: ISSUER }).aud, 'sts.amazonaws.com', 'the served JWKS verifies a token');
  } finally {
    await app.close();
  }
});

for (const tdb of availableTestDatabases()) {
  test(`DbSigningKeyStore on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const vault = new Vault(newVaultKeyFile());
      const store = new DbSigningKeyStore(db.kysely, vault);

      await t.test('keys round-trip, the private key sealed in the table', async () => {
        const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
        const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
        const kid = publicJwk(privateKey).kid;
        const key = { kid, privateKeyPem: pem, createdAt: T0, activeFrom: T0 + HOUR };
        await store.add(key);
        assert.deepEqual(await store.list(), [key]);
        const row = await db.kysely.selectFrom('t_svc_identity_key').selectAll().where('kid', '=', kid).executeTakeFirstOrThrow();
        assert.ok(!row.private_key_sealed.includes('PRIVATE KEY'), 'no PEM in the database');
        assert.ok(!row.private_key_sealed.includes(pem.split('\n')[1]), 'not even a line of it');
        assert.equal(vault.open(row.private_key_sealed, kid), pem);
        assert.throws(() => vault.open(row.private_key_sealed, 'another-kid'), /integrity check/, 'sealed for its own row only');
        const sameIdOtherKey = new Vault(newVaultKeyFile(vault.primary));
        assert.deepEqual(await new DbSigningKeyStore(db.kysely, sameIdOtherKey).list(), [], 'another vault key cannot open it: it is left out, the start not failed');
        await store.remove(kid);
        await store.remove(kid);
        assert.deepEqual(await store.list(), []);
      });

      await t.test('two issuers over the database share keys and verify each other\'s tokens', async () => {
        const clock = fakeClock();
        const a = newIssuer(store, clock.now);
        const b = newIssuer(new DbSigningKeyStore(db.kysely, vault), clock.now);
        await a.start();
        await b.start();
        const token = a.mint({ teamId: 'team-1', sandboxId: 'sbx-1', audience: 'sts.amazonaws.com' }).token;
        assert.equal(verifyJwt(token, b.jwks(), { audience: 'sts.amazonaws.com', issuer: ISSUER, now: clock.t }).sub, 'spiffe://svc.example.com/team/team-1/sandbox/sbx-1');
        clock.t = T0 + 23 * HOUR;
        await a.rotateIfDue();
        await b.rotateIfDue();
        assert.equal((await store.list()).length, 2);
        assert.deepEqual(kids(a.jwks()).sort(), kids(b.jwks()).sort());
        clock.t = T0 + 25 * HOUR + RETIRED_KEY_GRACE_MS;
        await b.rotateIfDue();
        await a.rotateIfDue();
        assert.equal((await store.list()).length, 1);
        assert.deepEqual(a.jwks(), b.jwks());
        const rows = await db.kysely.selectFrom('t_svc_identity_key').select(['active_from', 'created_at']).execute();
        assert.equal(typeof rows[0].active_from, 'number', 'bigint columns read back as numbers');
        assert.equal(rows[0].active_from, T0 + 24 * HOUR);
      });
    } finally {
      try {
        await db.close();
      } finally {
        await made.drop();
      }
    }
  });
}
