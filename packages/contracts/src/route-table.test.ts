import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathTo, routeGaps, type RouteTable } from './route-table.ts';

const table = {
  list: { method: 'GET', path: '/v1/things' },
  get: { method: 'GET', path: '/v1/things/:id' },
  remove: { method: 'DELETE', path: '/v1/things/:id' },
} as const satisfies RouteTable;

test('pathTo fills and encodes the parameters, and refuses a missing one', () => {
  assert.equal(pathTo(table.get, { id: 'a b/c' }), '/v1/things/a%20b%2Fc');
  assert.equal(pathTo(table.list), '/v1/things');
  assert.throws(() => pathTo(table.get), /needs its id/);
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
