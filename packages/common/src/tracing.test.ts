/**
 * Tracing off (no OTEL_* endpoint): nothing of OpenTelemetry's SDK is loaded and the helpers do
 * nothing. Tracing on is tracing-export.test.ts, in a process of its own (the SDK is process-wide).
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { after, before, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { JsonClient } from './http-client.ts';
import { createHttpApp } from './http-server.ts';
import { silentLogger } from './log.ts';
import { propagationFields, setSpanAttribute, startServerSpan, startTracing, traceClientCall, tracingOn, tracingWanted } from './tracing.ts';

for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];

/** The SDK's modules that are in the module cache (ESM imports of these CommonJS packages land there too). */
function sdkModulesLoaded(): string[] {
  const cache = createRequire(import.meta.url).cache;
  return Object.keys(cache).filter((f) => /@opentelemetry[\\/](sdk-|exporter-|core|resources|context-async-hooks)/.test(f));
}

let app: FastifyInstance;
let url: string;
let seenHeaders: Record<string, unknown> = {};

before(async () => {
  app = createHttpApp({ logger: silentLogger().child({ component: 'test' }) });
  app.get('/v1/sandboxes/:id', async (req) => {
    seenHeaders = req.headers;
    setSpanAttribute('svc.sandbox.id', 'ignored');
    return { ok: true };
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
});
after(() => app.close());

test('tracing is wanted only with an OTLP endpoint, and not when OTEL_SDK_DISABLED is true', () => {
  assert.equal(tracingWanted({}), false);
  assert.equal(tracingWanted({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }), true);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }), true);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'TRUE' }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'false' }), true);
});

test('off: startTracing loads nothing, servers and clients send no trace headers, the helpers are no-ops', async () => {
  const tracing = await startTracing('svc-test', silentLogger());
  assert.equal(tracingOn(), false);
  const answer = await new JsonClient(url).get<{ ok: boolean }>('/v1/sandboxes/sbx1', { headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
  assert.deepEqual(answer, { ok: true });
  // The caller's own header passes through untouched; nothing was added.
  assert.equal(seenHeaders.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  await new JsonClient(url).get('/v1/sandboxes/sbx2');
  assert.equal(seenHeaders.traceparent, undefined);
  assert.equal(startServerSpan('GET /', {}, {}), undefined);
  assert.deepEqual(propagationFields(), []);
  const headers: Record<string, string> = {};
  assert.equal(await traceClientCall('GET', url, headers, async () => 7, () => 200), 7);
  assert.deepEqual(headers, {});
  await tracing.close();
  assert.deepEqual(sdkModulesLoaded(), []);
});
