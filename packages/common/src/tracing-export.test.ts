/**
 * Tracing on: the real SDK, exporting OTLP/HTTP JSON to a receiver this test runs. Its own file
 * (so its own process): the SDK is process-wide. Off is tracing.test.ts.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { SvcError } from './errors.ts';
import { JsonClient } from './http-client.ts';
import { createHttpApp } from './http-server.ts';
import { silentLogger } from './log.ts';
import { OtlpReceiver, type ReceivedSpan } from './testing/otlp-receiver.ts';
import { SANDBOX_ID_ATTRIBUTE, setSpanAttribute, startTracing, tracingOn } from './tracing.ts';

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;
const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

const receiver = new OtlpReceiver();
let tracing: { close(): Promise<void> };
let gateway: FastifyInstance;
let master: FastifyInstance;
let gatewayUrl: string;
let masterUrl: string;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

before(async () => {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = await receiver.listen();
  process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
  tracing = await startTracing('svc-test', silentLogger());

  // Two servers as the gateway and the master are: a create, a route about a sandbox, a failure.
  master = createHttpApp({ logger: silentLogger().child({ component: 'master' }) });
  master.post('/v1/sandboxes', async (req, reply) => {
    reply.status(201);
    return { sandboxId: 'sbx-made', template: (req.body as { template: string }).template };
  });
  master.get('/v1/sandboxes/:id/broken', async () => { throw new SvcError(503, 'no capacity'); });
  master.get('/v1/teams/:id/sandboxes', async () => []);
  masterUrl = await listen(master);
  const masterClient = new JsonClient(masterUrl);

  gateway = createHttpApp({ logger: silentLogger().child({ component: 'api' }) });
  gateway.post('/sandboxes', async (req, reply) => {
    const made = await masterClient.post<{ sandboxId: string }>('/v1/sandboxes', { template: (req.body as { templateID: string }).templateID });
    setSpanAttribute(SANDBOX_ID_ATTRIBUTE, made.sandboxId);
    reply.status(201);
    return made;
  });
  gateway.get('/sandboxes/:sandboxID/broken', async (req) => masterClient.get(`/v1/sandboxes/${(req.params as { sandboxID: string }).sandboxID}/broken`));
  gatewayUrl = await listen(gateway);
});

after(async () => {
  await gateway.close();
  await master.close();
  await tracing.close();
  await receiver.close();
});

test('on: the SDK is loaded and a create makes a server span from the caller\'s traceparent, a client span and the callee\'s server span, one trace', async () => {
  assert.equal(tracingOn(), true);
  assert.ok(Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('@opentelemetry/sdk-node')), 'the SDK was loaded');

  const res = await fetch(`${gatewayUrl}/sandboxes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
    body: JSON.stringify({ templateID: 'base' }),
  });
  assert.equal(res.status, 201);

  const inTrace = (s: ReceivedSpan) => s.traceId === CALLER_TRACE;
  const [gw, call, ms] = await receiver.waitFor([
    (s) => inTrace(s) && s.kind === SERVER && s.name === 'POST /sandboxes',
    (s) => inTrace(s) && s.kind === CLIENT && s.name === 'POST',
    (s) => inTrace(s) && s.kind === SERVER && s.name === 'POST /v1/sandboxes',
  ]);
  assert.equal(gw.parentSpanId, CALLER_SPAN);
  assert.equal(call.parentSpanId, gw.spanId);
  assert.equal(ms.parentSpanId, call.spanId);

  assert.equal(gw.resource['service.name'], 'svc-test');
  assert.deepEqual(pick(gw.attributes, ['http.request.method', 'url.path', 'http.route', 'http.response.status_code', 'svc.component', 'svc.sandbox.id', 'svc.template.id']), {
    'http.request.method': 'POST', 'url.path': '/sandboxes', 'http.route': '/sandboxes', 'http.response.status_code': 201,
    'svc.component': 'api', 'svc.sandbox.id': 'sbx-made', 'svc.template.id': 'base',
  });
  assert.equal(call.attributes['url.full'], `${masterUrl}/v1/sandboxes`);
  assert.equal(call.attributes['http.response.status_code'], 201);
  assert.equal(ms.attributes['svc.component'], 'master');
  assert.equal(ms.attributes['svc.template.id'], 'base', "the master's create body names it `template`");
  assert.equal(gw.statusCode, 0);
});

test('on: a request with no traceparent starts a trace; a 5xx is an error on every span; sandbox ids come from the route', async () => {
  const res = await fetch(`${gatewayUrl}/sandboxes/sbx-9/broken?token=secret`);
  assert.equal(res.status, 503);
  const [gw, ms] = await receiver.waitFor([
    (s) => s.name === 'GET /sandboxes/:sandboxID/broken',
    (s) => s.name === 'GET /v1/sandboxes/:id/broken',
  ]);
  assert.equal(gw.parentSpanId, '');
  assert.equal(ms.traceId, gw.traceId);
  assert.equal(gw.statusCode, ERROR);
  assert.equal(ms.statusCode, ERROR);
  assert.equal(gw.attributes['svc.sandbox.id'], 'sbx-9');
  assert.equal(ms.attributes['svc.sandbox.id'], 'sbx-9');
  assert.equal(gw.attributes['url.path'], '/sandboxes/sbx-9/broken', 'no query string: it may hold a credential');

  // An `id` that follows no /sandboxes/ segment names no sandbox.
  await new JsonClient(masterUrl).get('/v1/teams/team-1/sandboxes');
  const [team] = await receiver.waitFor([(s) => s.name === 'GET /v1/teams/:id/sandboxes']);
  assert.equal(team.attributes['svc.sandbox.id'], undefined);
  assert.equal(team.parentSpanId, '', 'a call made outside any span starts no client span of its own');
  assert.deepEqual(receiver.refused, []);
});

test('on: an unknown route is a span named by its method alone', async () => {
  const res = await fetch(`${gatewayUrl}/nowhere`);
  assert.equal(res.status, 404);
  const [s] = await receiver.waitFor([(x) => x.attributes['url.path'] === '/nowhere']);
  assert.equal(s.name, 'GET');
  assert.equal(s.attributes['http.response.status_code'], 404);
  assert.equal(s.statusCode, 0, 'a 4xx is the caller\'s, not an error of the server');
});

function pick(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, o[k]]));
}
