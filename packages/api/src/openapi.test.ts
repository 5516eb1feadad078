import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, silentLogger } from '@svc/common';
import { MasterClient } from '@svc/contracts/master';
import { isMasterTemplatePath, PUBLIC_API as OPENAPI } from '@svc/contracts';
import { registerSandboxRoutes } from './routes.ts';
import { registerMetricRoutes } from './metric-routes.ts';

test('the OpenAPI document and the gateway\'s routes name the same paths and methods', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  const registered = new Set<string>();
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') registered.add(`${m} ${r.url.replace(/:([A-Za-z]+)/g, '{$1}')}`);
  });
  registerSandboxRoutes(app, new MasterClient('http://127.0.0.1:9'), 'example');
  registerMetricRoutes(app, { url: 'http://127.0.0.1:9', headers: {} });
  await app.ready();
  // index.ts registers these four itself, beside the template prefixes it forwards to the master
  // (packages/master/src/templates/routes/document-route.test.ts checks that the master serves those paths).
  registered.add('GET /health');
  registered.add('GET /openapi.json');
  registered.add('GET /docs');
  registered.add('GET /metrics');
  const documented = new Set<string>();
  for (const [path, item] of Object.entries(OPENAPI.paths)) {
    if (isMasterTemplatePath(path)) continue;
    for (const m of Object.keys(item)) documented.add(`${m.toUpperCase()} ${path}`);
  }
  assert.deepEqual([...registered].filter((r) => !documented.has(r)).sort(), [], 'served but not documented');
  assert.deepEqual([...documented].filter((r) => !registered.has(r)).sort(), [], 'documented but not served');
  await app.close();
});

test('every $ref of the document resolves', () => {
  const refs = JSON.stringify(OPENAPI).match(/#\/components\/schemas\/[A-Za-z0-9]+/g) ?? [];
  for (const r of new Set(refs)) assert.ok(r.split('/').pop()! in OPENAPI.components.schemas, r);
});
