/**
 * OpenTelemetry traces across the whole platform (docs/observability.md, "Traces
 * (OpenTelemetry)"): `svc up` exports to an OTLP/HTTP receiver this test runs, and a create made
 * with the official e2b SDK under the test's own `traceparent` shows up as one trace through the
 * gateway, the master and the node agent, then a request through the data-plane proxy in it too.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Sandbox } from 'e2b';
import { OtlpReceiver, type ReceivedSpan } from '@svc/common/testing/otlp-receiver';
import { startPlatform, useE2bEnv, diagnoseFailures, type RunningPlatform } from './harness.ts';

const SERVER = 2;

let p: RunningPlatform;
const receiver = new OtlpReceiver();
diagnoseFailures(() => p);
before(async () => {
  await receiver.listen();
  p = await startPlatform({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '200' } });
  useE2bEnv(p);
});
after(async () => {
  await p?.stop();
  await receiver.close();
});

test("a create under the caller's traceparent is one trace through the gateway, master and node agent; the proxy joins it", async () => {
  const traceId = randomBytes(16).toString('hex');
  const callerSpan = randomBytes(8).toString('hex');
  const traceparent = `00-${traceId}-${callerSpan}-01`;
  // The SDK sends its `headers` to the API (not to envd: its envd client sets its own).
  const sbx = await Sandbox.create('base', { headers: { traceparent } });
  try {
    const id = sbx.sandboxId;
    // envd's /health through the proxy, as the SDK's isRunning() asks it, with the caller's traceparent.
    const health = await fetch(`${p.sandboxUrl}/health`, { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', traceparent } });
    assert.equal(health.status, 204);
    const of = (component: string, name: string | RegExp) => (s: ReceivedSpan) =>
      s.traceId === traceId && s.kind === SERVER && s.attributes['svc.component'] === component && (typeof name === 'string' ? s.name === name : name.test(s.name));
    const [gateway, master, node, proxy] = await receiver.waitFor([
      // The SDK's version picks /sandboxes or /v2/sandboxes.
      of('api', /^POST \/(v2\/)?sandboxes$/),
      of('master', 'POST /v1/sandboxes'),
      of('node-agent', 'POST /v1/sandboxes'),
      of('proxy', 'GET sandbox'),
    ], 30_000);

    assert.equal(gateway.parentSpanId, callerSpan, "the gateway's span is the caller's child");
    for (const s of [gateway, master, node, proxy]) {
      assert.equal(s.resource['service.name'], 'svc', 'svc up is one process, one service');
      assert.equal(s.attributes['svc.sandbox.id'], id, `${s.attributes['svc.component']} names the sandbox`);
    }
    for (const s of [gateway, master, node]) assert.equal(s.attributes['http.response.status_code'], 201);
    assert.equal(gateway.attributes['svc.template.id'], 'base');
    assert.equal(master.attributes['svc.template.id'], 'base');
    assert.equal(typeof node.attributes['svc.template.id'], 'string', "the node agent's is the template's id, the alias resolved");

    // Each hop's parent is in the trace: the gateway's and the master's calls are client spans of theirs.
    const inTrace = new Map(receiver.spans.filter((s) => s.traceId === traceId).map((s) => [s.spanId, s]));
    assert.equal(inTrace.get(master.parentSpanId)?.parentSpanId, gateway.spanId);
    assert.equal(inTrace.get(node.parentSpanId)?.kind, 3, "the master's call to the node agent is a client span");

    assert.equal(proxy.parentSpanId, callerSpan, "envd's /health through the proxy is the caller's child too");
    assert.equal(proxy.attributes['url.path'], '/health');
    assert.equal(proxy.attributes['http.response.status_code'], 204, "envd's answer");
    assert.deepEqual(receiver.refused, []);
  } finally {
    await sbx.kill();
  }
});
