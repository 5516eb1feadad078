/**
 * A SERVER span per request of a server createHttpApp made, when tracing is on (tracing.ts):
 * named `<METHOD> <route>` (the route's URL template, so `POST /v1/sandboxes/:id/pause`), its
 * parent the caller's `traceparent`, active for the hooks and the handler so that the calls they
 * make carry it on. Off, createHttpApp adds none of these hooks.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { toSvcError } from './errors.ts';
import { SANDBOX_ID_ATTRIBUTE, startServerSpan, TEMPLATE_ID_ATTRIBUTE, type RequestSpan } from './tracing.ts';

export function traceRequests(app: FastifyInstance, component: string): void {
  const spans = new WeakMap<FastifyRequest, RequestSpan>();
  app.addHook('onRequest', (req, _reply, done) => {
    const route = req.routeOptions.url;
    const span = startServerSpan(route === undefined ? req.method : `${req.method} ${route}`, req.headers, {
      'http.request.method': req.method,
      'url.path': req.url.split('?')[0]!,
      ...(route === undefined ? {} : { 'http.route': route }),
      'svc.component': component,
    });
    if (!span) { done(); return; }
    spans.set(req, span);
    const sandboxId = sandboxIdOf(route, req.params);
    if (sandboxId !== undefined) span.setAttribute(SANDBOX_ID_ATTRIBUTE, sandboxId);
    const templateId = stringField(req.params, 'templateID');
    if (templateId !== undefined) span.setAttribute(TEMPLATE_ID_ATTRIBUTE, templateId);
    span.run(done);
  });
  // The body arrives on the socket's events, outside the span's context: enter it again for the handler.
  app.addHook('preHandler', (req, _reply, done) => {
    const span = spans.get(req);
    if (!span) { done(); return; }
    if (req.method === 'POST' && isCreate(req.routeOptions.url)) {
      const sandboxId = stringField(req.body, 'sandboxID') ?? stringField(req.body, 'sandboxId');
      if (sandboxId !== undefined) span.setAttribute(SANDBOX_ID_ATTRIBUTE, sandboxId);
      const templateId = stringField(req.body, 'templateID') ?? stringField(req.body, 'templateId') ?? stringField(req.body, 'template');
      if (templateId !== undefined) span.setAttribute(TEMPLATE_ID_ATTRIBUTE, templateId);
    }
    span.run(done);
  });
  app.addHook('onError', (req, _reply, err, done) => {
    if (toSvcError(err).status >= 500) spans.get(req)?.recordError(err);
    done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    spans.get(req)?.end(reply.statusCode);
    spans.delete(req);
    done();
  });
  app.addHook('onRequestAbort', (req, done) => {
    spans.get(req)?.setAttribute('error.type', 'client_closed');
    spans.get(req)?.end(undefined);
    spans.delete(req);
    done();
  });
}

/**
 * The sandbox a route is about: a path parameter `sandboxID` (the public API) or `sandboxId`
 * (the egress proxy's admin), or `id` right after a `/sandboxes/` segment (the master's and the
 * node agent's `/v1/sandboxes/:id...`, the internal routes'). A create learns its id from the
 * body (the node agent's) or sets it once made (setSpanAttribute).
 */
function sandboxIdOf(route: string | undefined, params: unknown): string | undefined {
  const byName = stringField(params, 'sandboxID') ?? stringField(params, 'sandboxId');
  if (byName !== undefined || route === undefined || !SANDBOX_ID_ROUTE.test(route)) return byName;
  return stringField(params, 'id');
}

const SANDBOX_ID_ROUTE = /\/sandboxes\/:id(\/|$)/;

/** A create: a POST to a route ending in `/sandboxes` (the gateway's `/sandboxes`, `/v2/sandboxes`; `/v1/sandboxes`). */
function isCreate(route: string | undefined): boolean {
  return route !== undefined && route.endsWith('/sandboxes');
}

function stringField(o: unknown, name: string): string | undefined {
  if (typeof o !== 'object' || o === null) return undefined;
  const v = (o as Record<string, unknown>)[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
}
