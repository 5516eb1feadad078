/**
 * Route tables: one per internal contract (node-agent.ts, template-center.ts, master-internal.ts),
 * the one place a route's method and path are written. The server registers from it, the client
 * in the same contract calls through it, each fake serves it, and a test beside each server
 * fails when the server registers a route its table lacks or the other way round
 * (docs/design.md, "Borders").
 */
import type { JsonClient, RequestOptions, ServedRoute } from '@svc/common';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Route {
  method: HttpMethod;
  /** fastify's form: `/v1/sandboxes/:id`. */
  path: string;
}

export type RouteTable = Readonly<Record<string, Route>>;

/** A route's path with its `:name` parameters filled in, each URL-encoded. */
export function pathTo(route: Route, params: Record<string, string> = {}): string {
  return route.path.replace(/:([A-Za-z][A-Za-z0-9_]*)/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`route ${route.method} ${route.path} needs its ${name}`);
    return encodeURIComponent(v);
  });
}

/** Calls a route of a table through a contract's client: its method, its filled path. */
export function call<T>(http: JsonClient, route: Route, params: Record<string, string> = {}, ro: RequestOptions = {}): Promise<T> {
  return http.request<T>(route.method, pathTo(route, params), ro);
}

/**
 * The differences between a table and what a server registered under the table's scope:
 * `unlisted` are registered and absent from the table, `unserved` in the table and not registered.
 */
export function routeGaps(table: RouteTable, registered: ServedRoute[], inScope: (url: string) => boolean = () => true): { unlisted: string[]; unserved: string[] } {
  const key = (m: string, url: string) => `${m.toUpperCase()} ${url}`;
  const served = new Set(registered.flatMap((r) => (Array.isArray(r.method) ? r.method : [r.method]).filter((m) => m !== 'HEAD').map((m) => key(m, r.url))));
  const listed = new Set(Object.values(table).map((r) => key(r.method, r.path)));
  const scoped = [...served].filter((k) => inScope(k.slice(k.indexOf(' ') + 1)));
  return {
    unlisted: scoped.filter((k) => !listed.has(k)).sort(),
    unserved: [...listed].filter((k) => !served.has(k)).sort(),
  };
}
