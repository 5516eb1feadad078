/**
 * The API's own /mcp tools call back into this API from its own address with the key of the
 * /mcp request. A key revoked since fails there; counted as failed key checks by that address,
 * a few such calls locked every MCP session of every team (and everyone else on loopback) out
 * for the rest of the minute. Their calls carry this process's secret and are not counted.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { SvcError } from '@svc/common';
import { authenticate, INTERNAL_CALLER_HEADER, type AuthConfig } from './auth.ts';
import { KeyVerifier } from './key-verifier.ts';
import { MinuteCounter } from './rate-limits.ts';

const ADMIN = 'e2b_00000000000000000000000000000000000000ad';
const REVOKED = 'e2b_0000000000000000000000000000000000000bad';

async function gateway() {
  const cfg: AuthConfig = {
    verifier: new KeyVerifier([ADMIN], { verify: async () => { throw new SvcError(401, 'unknown key'); } }),
    maxFailuresPerMin: 3, failures: new MinuteCounter(), requests: new MinuteCounter(), internalCaller: 'the-process-secret',
  };
  const app = Fastify();
  app.addHook('onRequest', async (req) => { await authenticate(req, cfg); });
  app.get('/v2/sandboxes', async (req) => ({ marker: req.headers[INTERNAL_CALLER_HEADER] ?? null }));
  return app;
}

const call = (app: Awaited<ReturnType<typeof gateway>>, key: string, headers: Record<string, string> = {}) =>
  app.inject({ method: 'GET', url: '/v2/sandboxes', remoteAddress: '127.0.0.1', headers: { 'x-api-key': key, ...headers } });

test('failed key checks marked with the process\'s secret are not counted against the address; any other mark is', async () => {
  const app = await gateway();
  for (let i = 0; i < 10; i++) assert.equal((await call(app, REVOKED, { [INTERNAL_CALLER_HEADER]: 'the-process-secret' })).statusCode, 401);
  const good = await call(app, ADMIN, { [INTERNAL_CALLER_HEADER]: 'the-process-secret' });
  assert.equal(good.statusCode, 200, 'the address is not cut off');
  assert.deepEqual(good.json(), { marker: null }, 'the mark is gone before the route reads the request');

  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await call(app, REVOKED, { [INTERNAL_CALLER_HEADER]: 'a-guess' })).statusCode);
  assert.deepEqual(statuses, [401, 401, 401, 429, 429], 'a wrong mark counts as any failed check');
  assert.equal((await call(app, ADMIN)).statusCode, 200, 'a key that verifies is served from an address over its budget');
  assert.equal((await call(app, REVOKED, { [INTERNAL_CALLER_HEADER]: 'the-process-secret' })).statusCode, 401, 'a marked call is a 401, never cut off');
});
