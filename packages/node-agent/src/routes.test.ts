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

test('GET /metrics answers the process\'s metrics on the node\'s network, as every route here (no token)', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  registerRoutes(app, {} as RouteDeps);
  await app.ready();
  const r = await app.inject({ method: 'GET', url: NODE_AGENT_ROUTES.prometheus.path });
  assert.equal(r.statusCode, 200);
  assert.match(String(r.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  assert.match(r.body, /^process_cpu_user_seconds_total \S+$/m);
  await app.close();
});
