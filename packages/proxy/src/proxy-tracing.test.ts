/**
 * The data plane with tracing on (its own file, so its own process: the SDK is process-wide): a
 * span per request, the client's traceparent its parent, the sandbox given the proxy's span.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { silentLogger, startTracing } from '@svc/common';
import { OtlpReceiver } from '@svc/common/testing/otlp-receiver';
import { call, sandboxHost } from './testing/client.ts';
import { startPlatform, Upstream, type Platform } from './testing/harness.ts';

const SERVER = 2;
const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

const receiver = new OtlpReceiver();
let tracing: { close(): Promise<void> };
let p: Platform;
let up: Upstream;

before(async () => {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = await receiver.listen();
  process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
  tracing = await startTracing('svc-proxy', silentLogger());
  p = await startPlatform();
  up = new Upstream('sbx-a');
  await up.listen();
  p.master.add({ sandboxId: 'sbxa', envdPort: up.port });
});
after(async () => {
  await p.close();
  await up.close();
  await tracing.close();
  await receiver.close();
});

test("a proxied request is a server span under the client's traceparent, and the sandbox gets the proxy's span as parent", async () => {
  const r = await call(p.proxy.httpUrl, {
    host: sandboxHost(up.port, 'sbxa'), path: '/health?sig=secret',
    headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01`, tracestate: 'vendor=1' },
  });
  assert.equal(r.status, 200);
  const [span] = await receiver.waitFor([(s) => s.traceId === CALLER_TRACE && s.kind === SERVER && s.name === 'GET sandbox']);
  assert.equal(span.parentSpanId, CALLER_SPAN);
  assert.deepEqual(
    { ...span.attributes },
    { 'http.request.method': 'GET', 'url.path': '/health', 'svc.component': 'proxy', 'svc.sandbox.id': 'sbxa', 'svc.sandbox.port': up.port, 'http.response.status_code': 200 },
  );

  const seen = up.requests.at(-1)!;
  // One traceparent (the proxy's, not the client's) and the client's tracestate carried on.
  assert.equal(seen.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'traceparent').length, 1);
  const [, traceId, parentId] = TRACEPARENT.exec(String(seen.headers.traceparent))!;
  assert.equal(traceId, CALLER_TRACE);
  assert.equal(parentId, span.spanId);
  assert.equal(seen.headers.tracestate, 'vendor=1');
});

test("the cold path's route lookup at the master is in the request's trace; a refusal is a span too", async () => {
  p.master.add({ sandboxId: 'cold', envdPort: up.port });
  const r = await call(p.proxy.httpUrl, { host: sandboxHost(up.port, 'cold'), headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` } });
  assert.equal(r.status, 200);
  const [proxied, lookup] = await receiver.waitFor([
    (s) => s.name === 'GET sandbox' && s.attributes['svc.sandbox.id'] === 'cold',
    (s) => s.name === 'GET /internal/v1/sandboxes/:id/route' && s.attributes['svc.sandbox.id'] === 'cold',
  ]);
  assert.equal(lookup.traceId, proxied.traceId);
  assert.equal(proxied.traceId, CALLER_TRACE);

  const missing = await call(p.proxy.httpUrl, { host: sandboxHost(8000, 'nosuch') });
  assert.equal(missing.status, 404);
  const [refused] = await receiver.waitFor([(s) => s.name === 'GET sandbox' && s.attributes['svc.sandbox.id'] === 'nosuch']);
  assert.equal(refused.attributes['http.response.status_code'], 404);
  assert.equal(refused.parentSpanId, '');
});

test('a WebSocket upgrade is a span lasting the connection, its traceparent sent to the sandbox', async () => {
  const ws = new WebSocket(`${p.proxy.httpUrl.replace('http', 'ws')}/`, { headers: { host: sandboxHost(up.port, 'sbxa'), traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` } });
  await new Promise<void>((resolve, reject) => { ws.once('open', () => resolve()); ws.once('error', reject); });
  const upgrade = up.requests.at(-1)!;
  ws.close();
  const [span] = await receiver.waitFor([(s) => s.name === 'GET sandbox' && s.attributes['url.path'] === '/' && s.parentSpanId === CALLER_SPAN && s.attributes['http.response.status_code'] === undefined]);
  assert.equal(TRACEPARENT.exec(String(upgrade.headers.traceparent))![2], span.spanId);
  assert.deepEqual(receiver.refused, []);
});
