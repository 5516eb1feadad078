import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, servedRoutes, silentLogger } from '@svc/common';
import { NODE_AGENT_ROUTES } from '@svc/contracts/node-agent';
import { routeGaps } from '@svc/contracts/route-table';
import { registerRoutes, type RouteDeps } from './routes.ts';

test('the node agent serves exactly the routes of NODE_AGENT_ROUTES', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  // The handlers never run here: registering reads no dependency.
  registerRoutes(app, {} as RouteDeps);
  await app.ready();
  assert.deepEqual(routeGaps(NODE_AGENT_ROUTES, servedRoutes(app)), { unlisted: [], unserved: [] });
  await app.close();
});
