import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, JsonClient, silentLogger } from '@svc/common';
import { answers, call, pathTo, routeGaps, serve, type RouteTable } from './route-table.ts';

const table = {
  list: { method: 'GET', path: '/v1/things' },
  get: { method: 'GET', path: '/v1/things/:id' },
  remove: { method: 'DELETE', path: '/v1/things/:id' },
} as const satisfies RouteTable;

test('pathTo fills and encodes the parameters, and refuses a missing one', () => {
  assert.equal(pathTo(table.get, { id: 'a b/c' }), '/v1/things/a%20b%2Fc');
  assert.equal(pathTo(table.list), '/v1/things');
  assert.throws(() => pathTo(table.get), /needs its id/);
  assert.throws(() => pathTo(table.get, { id: 'a\ud800' }), (e: { status?: number; message: string }) => e.status === 400 && /id is not valid Unicode/.test(e.message));
  assert.equal(pathTo({ method: 'GET', path: '/files/*' }, { '*': 'a dir/b%c' }), '/files/a%20dir/b%25c', 'a wildcard keeps its slashes');
  // encodeURIComponent leaves `*` as it is: a parameter that is one is not the template's wildcard (fuzz seed 946688657).
  assert.equal(pathTo(table.get, { id: '*' }), '/v1/things/*');
  assert.equal(pathTo({ method: 'GET', path: '/files/:dir/*' }, { dir: '*', '*': '*' }), '/files/*/*');
  // A dot segment would be resolved by fetch into another route: it names nothing (a 400).
  for (const dots of ['.', '..']) {
    assert.throws(() => pathTo(table.get, { id: dots }), (e: { status?: number; message: string }) => e.status === 400 && e.message === `the id may not be "${dots}"`);
    assert.throws(() => pathTo({ method: 'GET', path: '/files/*' }, { '*': `a/${dots}/b` }), (e: { status?: number }) => e.status === 400);
  }
  assert.equal(pathTo(table.get, { id: '...' }), '/v1/things/...', 'three dots are a name');
});

const typed = {
  setName: {
    method: 'POST', path: '/v1/things/:id/name',
    body: { type: 'object', properties: { name: { type: 'string', maxLength: 8 } }, required: ['name'] },
    answer: answers<{ id: string; name: string }>(),
  },
  find: {
    method: 'GET', path: '/v1/things',
    query: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, default: 10 } } },
    answer: answers<{ limit: number }>(),
  },
} as const satisfies RouteTable;

test('serve checks a route\'s schemas before its handler; call sends typed and reads typed', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  let ran = 0;
  serve(app, typed.setName, async (req) => { ran++; return { id: req.params.id, name: req.body.name }; });
  // The query's default is filled in: the handler sees a number.
  serve(app, typed.find, async (req) => ({ limit: req.query.limit }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const http = new JsonClient(`http://127.0.0.1:${(app.server.address() as { port: number }).port}`);
    const answer = await call(http, typed.setName, { id: 'x 1' }, { body: { name: 'ok' } });
    assert.deepEqual(answer, { id: 'x 1', name: 'ok' });
    assert.deepEqual(await call(http, typed.find, {}), { limit: 10 });
    assert.deepEqual(await call(http, typed.find, {}, { query: { limit: 3 } }), { limit: 3 });
    // @ts-expect-error: the body's type comes from the schema
    await assert.rejects(call(http, typed.setName, { id: 'x' }, { body: { name: 5 } }), (e: { status: number; message: string }) => e.status === 400 && e.message === 'name must be string');
    await assert.rejects(call(http, typed.setName, { id: 'x' }, { body: { name: 'far too long' } }), /name must NOT have more than 8 characters/);
    // No body at all is an empty object, which the schema then finds wanting.
    await assert.rejects(http.request('POST', '/v1/things/x/name'), /name is required/);
    await assert.rejects(call(http, typed.find, {}, { query: { limit: 0 } }), /query parameter limit must be >= 1/);
    assert.equal(ran, 1, 'a refused request never reaches the handler');
  } finally {
    await app.close();
  }
});

test('routeGaps names a registered route the table lacks and a table route nobody serves', () => {
  const served = [
    { method: ['GET', 'HEAD'], url: '/v1/things' },
    { method: 'GET', url: '/v1/things/:id' },
    { method: 'POST', url: '/v1/things' },
    { method: 'GET', url: '/health' },
  ];
  assert.deepEqual(routeGaps(table, served, (url) => url.startsWith('/v1/')), {
    unlisted: ['POST /v1/things'],
    unserved: ['DELETE /v1/things/:id'],
  });
  assert.deepEqual(routeGaps(table, [...served, { method: 'DELETE', url: '/v1/things/:id' }].filter((r) => r.method !== 'POST'), (u) => u.startsWith('/v1/')), { unlisted: [], unserved: [] });
});
