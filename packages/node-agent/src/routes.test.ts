import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, servedRoutes, silentLogger } from '@svc/common';
import { NODE_AGENT_ROUTES, NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { routeGaps } from '@svc/contracts/route-table';
import { registerRoutes, type RouteDeps } from './routes.ts';
import { requireNodeToken } from './node-token.ts';

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

test('node_agent.token: every route but /health and /metrics answers 401 without it; a wrong, empty or doubled token too', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  requireNodeToken(app, 'the-node-token', '0.0.0.0:8088');
  registerRoutes(app, { nodeId: 'n1', tasks: () => ({}), nodeInfo: () => ({ nodeId: 'n1' }) } as unknown as RouteDeps);
  await app.ready();
  try {
    for (const url of ['/health', NODE_AGENT_ROUTES.prometheus.path]) assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url);
    const attempts: Array<[string, string, Record<string, string | string[]>]> = [
      ['GET', '/v1/node', {}],
      ['GET', '/v1/node', { [NODE_TOKEN_HEADER]: 'the-node-tokeN' }],
      ['GET', '/v1/node', { [NODE_TOKEN_HEADER]: '' }],
      ['GET', '/v1/node', { [NODE_TOKEN_HEADER]: ['the-node-token', 'the-node-token'] }],
      ['POST', '/v1/sandboxes/x/exec', {}],
      ['GET', '/v1/volume-content/v/path?path=/', {}],
      ['POST', '/health', {}],
      ['GET', '/health/../v1/node', {}],
      ['GET', '//v1/node', {}],
    ];
    for (const [method, url, headers] of attempts) {
      const r = await app.inject({ method: method as 'GET', url, headers });
      assert.equal(r.statusCode, 401, `${method} ${url} ${JSON.stringify(headers)}: ${r.body}`);
      assert.match(r.json<{ message: string }>().message, /x-svc-node-token must equal node_agent\.token/);
    }
    const ok = await app.inject({ method: 'GET', url: '/v1/node', headers: { [NODE_TOKEN_HEADER]: 'the-node-token' } });
    assert.equal(ok.statusCode, 200, ok.body);
  } finally {
    await app.close();
  }
});
