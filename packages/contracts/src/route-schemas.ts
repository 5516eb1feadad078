/**
 * Route schemas read from the public OpenAPI document (public-api.ts), for the servers that serve
 * its routes (the gateway, the master's template routes): the body, query and path parameters a
 * route validates, and the answers it serializes. Nothing here restates a shape; a route's schema
 * is wherever the document says it is.
 */
import { PUBLIC_API, type PublicPath } from './public-api.ts';

/** What fastify takes as a route's `schema`. */
export interface RouteSchema {
  body?: object;
  querystring?: object;
  params?: object;
  response?: Record<string, object>;
}

type Content = Record<string, { schema?: object }>;
type Parameter = { name: string; in: string; required?: boolean; schema: object; description?: string };
/** One operation of the document, as far as the gateway and its docs page read it. */
export type Operation = {
  summary?: string;
  parameters?: readonly Parameter[];
  requestBody?: { required?: boolean; content: Content };
  responses: Record<string, { description: string; content?: Content }>;
};

const COMPONENTS = PUBLIC_API.components.schemas as unknown as Record<string, object>;

/** A schema with every `#/components/schemas/...` reference replaced by what it names. */
export function dereference(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(dereference);
  if (typeof schema !== 'object' || schema === null) return schema;
  const ref = (schema as { $ref?: unknown }).$ref;
  if (typeof ref === 'string') {
    const name = ref.replace('#/components/schemas/', '');
    const target = COMPONENTS[name];
    if (!target) throw new Error(`the public API document has no schema ${ref}`);
    return dereference(target);
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, dereference(v)]));
}

function jsonSchemaOf(content: Content | undefined): object | undefined {
  const media = content?.['application/json'];
  return media?.schema ? (dereference(media.schema) as object) : undefined;
}

function parametersIn(params: readonly Parameter[] | undefined, where: 'query' | 'path'): object | undefined {
  const own = (params ?? []).filter((p) => p.in === where);
  if (own.length === 0) return undefined;
  return {
    type: 'object',
    properties: Object.fromEntries(own.map((p) => [p.name, p.schema])),
    required: own.filter((p) => p.required).map((p) => p.name),
  };
}

/** The operation of `method` on `path` in the document, as a fastify schema. */
export function routeSchema(path: PublicPath, method: string): RouteSchema {
  const item = PUBLIC_API.paths[path] as unknown as Record<string, Operation | undefined>;
  const op = item[method.toLowerCase()];
  if (!op) throw new Error(`the public API document has no ${method} ${path}`);
  const schema: RouteSchema = {};
  const body = jsonSchemaOf(op.requestBody?.content) as { type?: unknown } | undefined;
  // fastify checks an absent body as null: an optional body may be null, or left out.
  if (body) schema.body = op.requestBody?.required ? body : { ...body, type: [body.type, 'null'] };
  const querystring = parametersIn(op.parameters, 'query');
  if (querystring) schema.querystring = querystring;
  const params = parametersIn(op.parameters, 'path');
  if (params) schema.params = params;
  const response: Record<string, object> = {};
  for (const [status, answer] of Object.entries(op.responses)) {
    const s = jsonSchemaOf(answer.content);
    if (s) response[status] = s;
  }
  schema.response = response;
  return schema;
}

/** `/sandboxes/{sandboxID}` as fastify writes it: `/sandboxes/:sandboxID`. */
export const fastifyPath = (path: PublicPath): string => path.replace(/\{([A-Za-z]+)\}/g, ':$1');

/**
 * What a server's `route()` needs of a documented operation (method, url, schema): the gateway,
 * the master's template routes and the SDK's fake gateway each add only their handler.
 */
export function documentedRoute<M extends string>(method: M | M[], path: PublicPath): { method: M | M[]; url: string; schema: RouteSchema } {
  return { method, url: fastifyPath(path), schema: routeSchema(path, Array.isArray(method) ? method[0]! : method) };
}
