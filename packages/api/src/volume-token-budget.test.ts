/**
 * The failed-check budget on E2B's volume content calls (volume-token-budget.ts): they carry the
 * volume's token, not a key, and until 2026-12-01 a wrong token cost the client nothing here.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import Fastify from 'fastify';
import { MinuteCounter } from './rate-limits.ts';
import { registerVolumeContentRoutes } from './volume-routes.ts';
import { VolumeTokenBudget } from './volume-token-budget.ts';

const GOOD = 'good-volume-token-0123456789';
let masterCalls = 0;
const master = Fastify();
master.all('/svc/volumecontent/*', async (req, reply) => {
  masterCalls++;
  if (req.headers.authorization !== `Bearer ${GOOD}`) return reply.status(401).send({ code: 401, message: 'invalid volume token' });
  return { ok: true };
});
const masterUrl = await master.listen({ host: '127.0.0.1', port: 0 });
after(() => master.close());

async function gateway(limit: number) {
  const app = Fastify();
  const failures = new MinuteCounter();
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    registerVolumeContentRoutes(scope, { url: masterUrl, headers: {} }, { budget: new VolumeTokenBudget(failures, limit), clientAddress: (req) => req.ip });
  });
  const call = (token: string, from = '192.0.2.10') => app.inject({
    method: 'GET', url: '/volumecontent/vol-1/path?path=/a', remoteAddress: from, headers: { authorization: `Bearer ${token}` },
  });
  return { call, failures };
}

test('wrong volume tokens count against the client: over the budget they are refused without reaching the master', async () => {
  const { call } = await gateway(3);
  const before = masterCalls;
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await call(`wrong-token-${i}-0123456789abcdef`)).statusCode);
  assert.deepEqual(statuses, [401, 401, 401, 429, 429, 429]);
  assert.equal(masterCalls - before, 3, 'only the guesses under the budget reached the master');
  const refused = await call('wrong-token-x-0123456789abcdef');
  assert.ok(Number(refused.headers['retry-after']) >= 1, 'a 429 says when to retry');
  assert.match(refused.json().message, /too many failed volume token checks/);
  assert.equal((await call('wrong-token-y', '198.51.100.4')).statusCode, 401, 'another client keeps its own budget');
});

test('a token the master accepted lately keeps working from a client over its budget; a new one waits', async () => {
  const { call } = await gateway(2);
  assert.equal((await call(GOOD)).statusCode, 200);
  for (let i = 0; i < 3; i++) await call(`wrong-${i}-0123456789abcdef`);
  assert.equal((await call(GOOD)).statusCode, 200, 'the known-good token is served');
  assert.equal((await call('wrong-z-0123456789abcdef')).statusCode, 429);
});
