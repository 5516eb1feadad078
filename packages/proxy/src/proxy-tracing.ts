/**
 * The data plane's spans (docs/observability.md, "Traces (OpenTelemetry)"): a SERVER span per
 * request, `<METHOD> sandbox`, its parent the client's `traceparent`, and the sandbox given this
 * span's `traceparent` instead of the client's. The data plane calls these only after
 * tracingOn(): with tracing off it builds nothing for them.
 */
import type { Duplex } from 'node:stream';
import type { ServerReply, ServerRequest } from '@svc/http1';
import { propagationFields, SANDBOX_ID_ATTRIBUTE, startServerSpan, type RequestSpan } from '@svc/common';
import type { ScannedRequest } from './headers.ts';
import type { Target } from './target.ts';

/** An HTTP request: `next` (the forwarding) runs in its span, which ends with the answer or when the client leaves. */
export function traceRequest(req: ServerRequest, res: ServerReply, scan: ScannedRequest, target: Target | null, next: () => void): void {
  const span = requestSpan(req, scan, target);
  if (!span) { next(); return; }
  res.onClose(() => {
    if (!res.headersSent) span.setAttribute('error.type', 'client_closed');
    span.end(res.headersSent ? res.statusCode : undefined);
  });
  span.run(next);
}

/** An Upgrade (WebSocket): its span lasts as long as the client's connection. */
export function traceUpgrade(req: ServerRequest, socket: Duplex, scan: ScannedRequest, target: Target | null, next: () => void): void {
  const span = requestSpan(req, scan, target);
  if (!span) { next(); return; }
  socket.once('close', () => span.end(undefined));
  span.run(next);
}

function requestSpan(req: ServerRequest, scan: ScannedRequest, target: Target | null): RequestSpan | undefined {
  const method = req.method;
  const url = req.url;
  const q = url.indexOf('?');
  // The path without its query: a signed file URL's query is its credential.
  const span = startServerSpan(`${method} sandbox`, req.headers, {
    'http.request.method': method,
    'url.path': q < 0 ? url : url.slice(0, q),
    'svc.component': 'proxy',
  });
  if (!span) return undefined;
  if (target !== null) {
    span.setAttribute(SANDBOX_ID_ATTRIBUTE, target.sandboxId);
    // Absent: envd's port (the E2b-Sandbox-Port header or the host named none).
    if (target.port !== 0) span.setAttribute('svc.sandbox.port', target.port);
  }
  replaceTraceHeaders(scan.forward, span.headers());
  return span;
}

/** The client's trace headers out of what goes to the sandbox, this span's in. */
function replaceTraceHeaders(forward: string[], ours: Record<string, string>): void {
  const fields = propagationFields();
  for (let i = forward.length - 2; i >= 0; i -= 2) {
    if (fields.includes(forward[i].toLowerCase())) forward.splice(i, 2);
  }
  for (const [name, value] of Object.entries(ours)) forward.push(name, value);
}
