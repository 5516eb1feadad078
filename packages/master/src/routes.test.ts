/**
 * The whole master, started as it runs, serves no route that is in neither one of its contracts'
 * route tables nor the public OpenAPI document (its template routes are the document's), and
 * serves every route of its tables (route-table.ts; docs/design.md, "Borders").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { servedRoutes } from '@svc/common';
import { PUBLIC_API } from '@svc/contracts';
import { MASTER_EGRESS_ROUTES } from '@svc/contracts/egress-routes';
import { IDENTITY_ROUTES } from '@svc/contracts/identity';
import { MASTER_ROUTES } from '@svc/contracts/master';
import { MASTER_DOWNLOAD_ROUTES } from '@svc/contracts/master-downloads';
import { MASTER_INTERNAL_ROUTES } from '@svc/contracts/master-internal';
import { routeGaps, type HttpMethod, type Route, type RouteTable } from '@svc/contracts/route-table';
import { EVENT_ROUTES } from '@svc/contracts/events';
import { METRICS_HISTORY_ROUTES } from '@svc/contracts/metrics-history';
import { SECRET_ROUTES } from '@svc/contracts/secrets';
import { TEAM_ROUTES } from '@svc/contracts/teams';
import { TEMPLATE_CALLBACK_ROUTES } from '@svc/contracts/template-callback';
import { MASTER_VOLUME_ROUTES, VOLUME_CONTENT_PATH } from '@svc/contracts/volumes';
import { startMasterOverFakeNode } from './testing/master-over-fake-node.ts';

const TABLES: Record<string, RouteTable> = {
  MASTER_ROUTES, MASTER_INTERNAL_ROUTES, MASTER_EGRESS_ROUTES, TEAM_ROUTES, SECRET_ROUTES, IDENTITY_ROUTES, MASTER_VOLUME_ROUTES, TEMPLATE_CALLBACK_ROUTES, MASTER_DOWNLOAD_ROUTES, EVENT_ROUTES, METRICS_HISTORY_ROUTES,
};

/** The public document's operations in fastify's path form (`{id}` → `:id`). */
function documentRoutes(): RouteTable {
  const out: Record<string, Route> = {};
  for (const [path, item] of Object.entries(PUBLIC_API.paths)) {
    for (const method of Object.keys(item)) {
      const m = method.toUpperCase() as HttpMethod;
      out[`${m} ${path}`] = { method: m, path: path.replace(/\{([^}]+)\}/g, ':$1') };
    }
  }
  return out;
}

test('the master serves exactly its route tables, beside the public document\'s template routes', async () => {
  const h = await startMasterOverFakeNode();
  try {
    const served = servedRoutes(h.master.app);
    const tables = Object.values(TABLES).flatMap((t) => Object.values(t));
    const all = Object.fromEntries([...tables, ...Object.values(documentRoutes())].map((r) => [`${r.method} ${r.path}`, r]));
    // The volume content API passes every method through to a node agent: a prefix, not a route.
    const gaps = routeGaps(all, served, (url) => !url.startsWith(`${VOLUME_CONTENT_PATH}/`));
    assert.deepEqual(gaps.unlisted, [], 'served, and in no table');
    // This master's template module is a stand-in without a builder: the template center's
    // callback and the context files' download come with the real ones (side-routes.test.ts).
    const notBuilt = new Set([`GET ${MASTER_DOWNLOAD_ROUTES.templateFiles.path}`, `POST ${TEMPLATE_CALLBACK_ROUTES.status.path}`]);
    const internal = new Set(tables.map((r) => `${r.method} ${r.path}`));
    assert.deepEqual(gaps.unserved.filter((k) => internal.has(k) && !notBuilt.has(k)), [], 'in a table, and not served');
  } finally {
    await h.close();
  }
});
