import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { servedRoutes } from '@svc/common';
import { routeGaps, type RouteTable } from './route-table.ts';

/** The HTTP status a client call failed with; fails the test when the call succeeded. For the contract suites. */
export async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (e) {
    return (e as { status: number }).status;
  }
  throw new Error('expected the call to fail');
}

/** Fails unless `app` (made by createHttpApp, ready) registered exactly the routes of `table`, naming the ones that differ. */
export function assertServesExactly(app: FastifyInstance, table: RouteTable): void {
  assert.deepEqual(routeGaps(table, servedRoutes(app)), { unlisted: [], unserved: [] });
}
