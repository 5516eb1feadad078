/**
 * Route tables: one per internal contract (node-agent-routes.ts, template-center.ts,
 * master-routes.ts, ...), the one place a route's method, path, input schemas and answer type
 * are written. The server registers from it (`serve`), the client in the same contract calls
 * through it (`call`), each fake serves it, a test beside each server fails when the server
 * registers a route its table lacks or the other way round, and the lint refuses a route
 * registered from a literal path (docs/design.md, "Borders").
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import { badRequest, type JsonClient, type RequestOptions, type ServedRoute } from '@svc/common';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Route {
  method: HttpMethod;
  /** fastify's form: `/v1/sandboxes/:id`; a trailing `*` takes the rest of the path. */
  path: string;
  /**
   * The body's JSON schema: the server refuses another body with a 400 naming the field before
   * the handler runs (common/schema-validation.ts: exactly as sent, nothing coerced), and the
   * handler and the client see its type.
   */
  body?: JSONSchema;
  /** The query's JSON schema: text coerced to its types, its defaults filled in. */
  query?: JSONSchema;
  /** Type only: what a 2xx answer carries, written `answer: answers<T>()`. */
  answer?: unknown;
}

export type RouteTable = Readonly<Record<string, Route>>;

/** The type a route's 2xx answer carries, for the table (the value is always undefined). */
export function answers<T>(): T | undefined {
  return undefined;
}

type Names<P extends string> =
  P extends `${string}:${infer Name}/${infer Rest}` ? Name | Names<`/${Rest}`>
    : P extends `${string}:${infer Name}` ? Name
      : never;

/** A path's parameters by name: `/v1/sandboxes/:id` has `{ id: string }`; a trailing `*` is `'*'`. */
export type ParamsOf<P extends string> = { [K in Names<P> | (P extends `${string}*` ? '*' : never)]: string };

/**
 * A schema's type without the `[x: string]: unknown` an open object (no `additionalProperties:
 * false`) gets: the fields it names are what code may read, and an interface is assignable to
 * it. A map's typed index (`additionalProperties: { type: 'string' }`) stays.
 */
type Named<T> = T extends readonly (infer U)[] ? Named<U>[]
  : T extends object ? { [K in keyof T as string extends K ? (unknown extends T[K] ? never : K) : K]: Named<T[K]> }
    : T;

/** A schema's wire type: what a sender writes (a field with a default may be left out). */
export type WireOf<S extends JSONSchema> = Named<FromSchema<S, { keepDefaultedPropertiesOptional: true }>>;

/** The body a route takes: its schema's type, or anything when it has none. */
export type BodyOf<R extends Route> = R extends { body: infer S extends JSONSchema } ? WireOf<S> : unknown;

/** The query a handler sees: its schema's type with the defaults filled in. */
export type QueryOf<R extends Route> = R extends { query: infer S extends JSONSchema } ? Named<FromSchema<S>> : Record<string, string | string[] | undefined>;

/** The query a client sends: the defaulted fields optional. */
type QuerySent<R extends Route> = R extends { query: infer S extends JSONSchema } ? WireOf<S> : RequestOptions['query'];

export type AnswerOf<R extends Route> = R extends { answer?: infer A } ? Exclude<A, undefined> : unknown;

export type RouteRequest<R extends Route> = FastifyRequest<{ Body: BodyOf<R>; Querystring: QueryOf<R>; Params: ParamsOf<R['path']> }>;

/**
 * Registers a table's route on a server: its method and path, its schemas checked before the
 * handler runs, and the handler typed by them.
 */
export function serve<R extends Route>(
  app: FastifyInstance,
  route: R,
  handler: (req: RouteRequest<R>, reply: FastifyReply) => Promise<AnswerOf<R> | FastifyReply | undefined>,
): void {
  const schema = { ...(route.body ? { body: route.body } : {}), ...(route.query ? { querystring: route.query } : {}) };
  app.route({
    method: route.method, url: route.path, schema, handler: handler as (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
    // No body at all is an empty object, as SDKs send `POST /pause` (common/http-server.ts): its
    // schema then says which fields are required.
    ...(route.body ? { preValidation: async (req: FastifyRequest) => { if (req.body === undefined) req.body = {}; } } : {}),
  });
}

/**
 * A route's path with its `:name` parameters filled in, each URL-encoded, and a trailing `*` with
 * the rest of the path (each of its segments encoded, its slashes kept).
 */
export function pathTo(route: Route, params: Record<string, string> = {}): string {
  const need = (name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`route ${route.method} ${route.path} needs its ${name}`);
    return v;
  };
  // The wildcard is the template's, never a `*` that a filled parameter ends with.
  const wild = route.path.endsWith('*');
  const filled = (wild ? route.path.slice(0, -1) : route.path).replace(/:([A-Za-z][A-Za-z0-9_]*)/g, (_, name: string) => encoded(need(name), name));
  return wild ? filled + need('*').split('/').map((part) => encoded(part, 'path')).join('/') : filled;
}

function encoded(v: string, name: string): string {
  // encodeURIComponent leaves dots as they are, and fetch would resolve such a segment, sending
  // the call to another route (docs/security.md, "The gateway's paths"): it names nothing.
  if (v === '.' || v === '..') throw badRequest(`the ${name} may not be "${v}"`);
  try {
    return encodeURIComponent(v);
  } catch {
    // A lone surrogate (from a JSON body) cannot be a path segment, so it names nothing.
    throw badRequest(`the ${name} is not valid Unicode`);
  }
}

/** What a call sends beside the path: the body and query typed by the route's schemas. */
export type CallOptions<R extends Route> = Omit<RequestOptions, 'body' | 'query'> & { body?: BodyOf<R>; query?: QuerySent<R> };

/** Calls a route of a table through a contract's client: its method, its filled path, its typed body and answer. */
export function call<R extends Route>(http: JsonClient, route: R, params: NoInfer<ParamsOf<R['path']>>, ro: NoInfer<CallOptions<R>> = {}): Promise<AnswerOf<R>> {
  return http.request<AnswerOf<R>>(route.method, pathTo(route, params as Record<string, string>), ro as RequestOptions);
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
