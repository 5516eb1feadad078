/**
 * The data-plane proxy's admin routes (port 8082 or SVC_PROXY_ADMIN_PORT), in PROXY_ADMIN_ROUTES:
 *   GET  /admin/healthz                 → ProxyHealth
 *   GET  /metrics                       → the process's Prometheus metrics (text); the same token rule as the purge
 *   POST /admin/backend_cache/delete    → 204 (body { sandboxIds?: string[] }; none, or no body = purge all)
 *        Header X-Svc-Admin-Token must equal the proxy's $svc_admin_token; a mismatch is 403, and
 *        with no token configured every call is 503 (before the body is looked at).
 * Data plane (port 3002 in `svc up`, 80/443 in production installs): see docs/data-plane.md.
 */
import { JsonClient, type TaskStats } from '@svc/common';
import { answers, call, type RouteTable } from './route-table.ts';
import { METRICS_ROUTE } from './metrics-route.ts';

export const ADMIN_TOKEN_HEADER = 'x-svc-admin-token';
/** Accepted traffic-token headers; the first two are svc's, the third is E2B's (docs/data-plane.md). */
export const TRAFFIC_TOKEN_HEADERS = ['ext-traffic-access-token', 'svc-traffic-access-token', 'e2b-traffic-access-token'] as const;

export interface ProxyHealth {
  ok: true;
  proxyId: string;
  heartbeat_last_pushed_ms: number;
  cachedBackends: number;
  /** How the proxy's background tasks fare (announcement, activity report). */
  tasks: Record<string, TaskStats>;
}

/**
 * The proxy's admin routes (route-table.ts): its admin server registers them, ProxyAdminClient
 * (the master's cache purge) calls them.
 */
export const PROXY_ADMIN_ROUTES = {
  health: { method: 'GET', path: '/admin/healthz', answer: answers<ProxyHealth>() },
  /** The process's Prometheus metrics; the admin token as the purge (docs/observability.md). */
  metrics: METRICS_ROUTE,
  purge: {
    method: 'POST',
    path: '/admin/backend_cache/delete',
    // null: no body at all (fastify validates an absent body as null), which purges everything.
    body: { type: ['object', 'null'], properties: { sandboxIds: { type: 'array', items: { type: 'string' } } } },
    answer: answers<void>(),
  },
} as const satisfies RouteTable;

const R = PROXY_ADMIN_ROUTES;

export class ProxyAdminClient {
  private readonly http: JsonClient;
  constructor(baseUrl: string, adminToken: string) {
    this.http = new JsonClient(baseUrl, { timeoutMs: 3_000, headers: adminToken ? { [ADMIN_TOKEN_HEADER]: adminToken } : {} });
  }
  health() { return call(this.http, R.health, {}); }
  /** Purges these sandboxes' cached routes; none: every cached route. */
  purge(sandboxIds?: string[]) { return call(this.http, R.purge, {}, { body: { sandboxIds } }); }
}
