/**
 * The failed-key budget behind a load balancer (auth.ts, client-address.ts). It was counted per
 * peer address and applied before the key was checked: behind the TLS terminator docs/cluster.md
 * recommends, 30 bad keys a minute from anyone got every team's valid requests a 429. Now a key
 * that verifies is always served, and from a peer in api.trusted_proxies the budget is the
 * client's, read from X-Forwarded-For, as is the audit log's `source`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { SvcError } from '@svc/common';
import { apiKeyHash, NO_LIMITS } from '@svc/contracts/teams';
import { authenticate, type AuthConfig } from './auth.ts';
import { ClientAddresses } from './client-address.ts';
import { KeyVerifier } from './key-verifier.ts';
import { MinuteCounter } from './rate-limits.ts';

const GOOD = 'e2b_00000000000000000000000000000000000000ad';
const BAD = 'e2b_0000000000000000000000000000000000000bad';
const LB = '10.0.0.2';

function gateway(trusted: string) {
  const clients = new ClientAddresses(trusted);
  const cfg: AuthConfig = {
    verifier: new KeyVerifier([GOOD], { verify: async () => { throw new SvcError(401, 'unknown key'); } }),
    maxFailuresPerMin: 3, failures: new MinuteCounter(), requests: new MinuteCounter(), clientAddress: (req) => clients.of(req),
  };
  const app = Fastify();
  app.addHook('onRequest', async (req) => { await authenticate(req, cfg); });
  app.get('/v2/sandboxes', async (req) => ({ client: clients.of(req) }));
  const call = (key: string, from: string, forwarded?: string) => app.inject({
    method: 'GET', url: '/v2/sandboxes', remoteAddress: from, headers: { 'x-api-key': key, ...(forwarded === undefined ? {} : { 'x-forwarded-for': forwarded }) },
  });
  return { call };
}

test('a key that verifies is served from an address over its failed-check budget; only failing checks get 429', async () => {
  const { call } = gateway('');
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await call(BAD, LB)).statusCode);
  assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
  assert.equal((await call(GOOD, LB)).statusCode, 200, 'the good key is served');
  assert.equal((await call(BAD, LB)).statusCode, 429, 'the bad ones still wait');
});

test('behind a trusted proxy the budget is the client\'s from X-Forwarded-For: one client\'s bad keys cut off that client alone', async () => {
  const { call } = gateway('10.0.0.0/24, 2001:db8::/64');
  for (let i = 0; i < 4; i++) await call(BAD, LB, '198.51.100.7');
  assert.equal((await call(BAD, LB, '198.51.100.7')).statusCode, 429, 'the guessing client is cut off');
  assert.equal((await call(BAD, LB, '203.0.113.9')).statusCode, 401, 'another client behind the same proxy is not');
  assert.equal((await call(BAD, '2001:db8::5', '203.0.113.10')).statusCode, 401, 'a proxy on IPv6');
  // The client writes what it likes to the left of what the proxy appended: only the right-most untrusted hop counts.
  assert.equal((await call(BAD, LB, '203.0.113.50, 198.51.100.7')).statusCode, 429, 'a forged left-most address does not get a new budget');
  assert.equal((await call(BAD, LB, '198.51.100.7, 10.0.0.9')).statusCode, 429, 'a trusted hop on the right is skipped');
});

test('X-Forwarded-For is read only from a trusted peer; the address read is the request\'s client', async () => {
  const { call } = gateway('10.0.0.0/24');
  const client = async (from: string, forwarded?: string) => (await call(GOOD, from, forwarded)).json().client;
  assert.equal(await client(LB, '198.51.100.7'), '198.51.100.7');
  assert.equal(await client(LB, '198.51.100.7, 10.0.0.3'), '198.51.100.7');
  assert.equal(await client(LB, '[2001:db8::7]:443'), '2001:db8::7', 'a bracketed IPv6 address with a port');
  assert.equal(await client(LB), LB, 'no header: the proxy itself');
  assert.equal(await client(LB, 'garbage, 10.0.0.3'), '10.0.0.3', 'not an address: the last trusted hop that wrote one');
  assert.equal(await client('192.0.2.44', '198.51.100.7'), '192.0.2.44', 'an untrusted peer names no other address');
  assert.equal(await client('::ffff:192.0.2.44'), '192.0.2.44', 'an IPv4-mapped peer as its IPv4 address');

  const untrusted = gateway('');
  for (let i = 0; i < 4; i++) await untrusted.call(BAD, '192.0.2.44', `198.51.100.${i}`);
  assert.equal((await untrusted.call(BAD, '192.0.2.44', '198.51.100.99')).statusCode, 429, 'a client cannot escape its budget by naming addresses');
});

test('over its budget a client\'s keys are looked up only when they verified here lately: random keys cost the master nothing', async () => {
  const TEAM = 'e2b_00000000000000000000000000000000000000aa';
  const NEW_TEAM = 'e2b_00000000000000000000000000000000000000bb';
  const good = new Set([apiKeyHash(TEAM), apiKeyHash(NEW_TEAM)]);
  let lookups = 0;
  const cfg: AuthConfig = {
    verifier: new KeyVerifier([], {
      verify: async (hash) => {
        lookups++;
        if (!good.has(hash)) throw new SvcError(401, 'unknown key');
        return { keyId: `k-${hash.slice(0, 4)}`, teamId: 'team-a', admin: false, limits: NO_LIMITS };
      },
    }),
    maxFailuresPerMin: 3, failures: new MinuteCounter(), requests: new MinuteCounter(),
  };
  const app = Fastify();
  app.addHook('onRequest', async (req) => { await authenticate(req, cfg); });
  app.get('/v2/sandboxes', async () => ({}));
  const call = (key: string) => app.inject({ method: 'GET', url: '/v2/sandboxes', remoteAddress: LB, headers: { 'x-api-key': key } });
  assert.equal((await call(TEAM)).statusCode, 200);
  for (let i = 0; i < 3; i++) assert.equal((await call(`e2b_${String(i).padStart(40, '0')}`)).statusCode, 401);
  const before = lookups;
  for (let i = 3; i < 50; i++) assert.equal((await call(`e2b_${String(i).padStart(40, '0')}`)).statusCode, 429);
  assert.equal(lookups, before, 'no lookup for a random key over the budget');
  await new Promise((r) => setTimeout(r, 1_000)); // past the verifier's 0.9 s cache: the key is looked up again
  assert.equal((await call(TEAM)).statusCode, 200, 'a key that verified here is still served');
  assert.equal(lookups, before + 1, 'and checked again');
  assert.equal((await call(NEW_TEAM)).statusCode, 429, 'a key first seen over the budget waits for the minute');
});
