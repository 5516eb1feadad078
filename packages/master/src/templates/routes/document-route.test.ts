import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, silentLogger } from '@svc/common';
import { isMasterTemplatePath, PUBLIC_API } from '@svc/contracts';
import { registerBuildRoutes } from '../../builds/routes.ts';
import { ContextFiles } from '../../builds/context-files.ts';
import type { TemplateService } from '../service.ts';
import { registerDownloadRoute } from './download.ts';
import { registerE2bTemplateRoutes } from './e2b.ts';
import { registerSvcTemplateRoutes } from './svc.ts';

test('the template paths of the public OpenAPI document (the builder\'s too) are the ones the master serves', async () => {
  const app = createHttpApp({ logger: silentLogger() });
  const served = new Set<string>();
  app.addHook('onRoute', (r) => {
    // The nodes' internal download route is not public.
    if (r.url.startsWith('/internal/')) return;
    for (const m of [r.method].flat()) if (m !== 'HEAD') served.add(`${m} ${r.url.replace(/:([A-Za-z]+)/g, '{$1}')}`);
  });
  // Registering calls no service; the routes only need it when a request comes.
  const service = {} as TemplateService;
  registerSvcTemplateRoutes(app, service);
  registerE2bTemplateRoutes(app, service);
  registerDownloadRoute(app, {} as never, {} as never);
  registerBuildRoutes(app, {} as never);
  await new ContextFiles({ templateCenter: {} as never, masterAddr: '', signingKey: 'k', logger: silentLogger(), records: {} as never, teamMaxBytes: 1 }).registerRoutes(app);
  await app.ready();
  const documented = new Set<string>();
  for (const [path, item] of Object.entries(PUBLIC_API.paths)) {
    if (!isMasterTemplatePath(path)) continue;
    for (const m of Object.keys(item)) documented.add(`${m.toUpperCase()} ${path}`);
  }
  assert.deepEqual([...served].filter((r) => !documented.has(r)).sort(), [], 'served but not documented');
  assert.deepEqual([...documented].filter((r) => !served.has(r)).sort(), [], 'documented but not served');
  await app.close();
});
