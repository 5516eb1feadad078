/**
 * A stand-in OpenTelemetry collector for tests: a loopback HTTP server that takes OTLP/HTTP JSON
 * (`POST /v1/traces`, what tracing.ts's exporter sends) and keeps every span, flattened.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received span, its attributes as plain values and its resource's beside them. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's: 2 server, 3 client. */
  kind: number;
  /** OTLP's: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
}

interface OtlpValue { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean }
interface OtlpAttribute { key: string; value: OtlpValue }
interface OtlpBody {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: Array<{ spans?: Array<{ traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number; attributes?: OtlpAttribute[]; status?: { code?: number } }> }>;
  }>;
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Bodies that were not OTLP JSON (the test fails on them: the exporter sent something else). */
  readonly refused: string[] = [];
  private readonly server: Server;
  url = '';

  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (req.method !== 'POST' || req.url !== '/v1/traces' || !/json/.test(req.headers['content-type'] ?? '')) {
          this.refused.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
          res.writeHead(404).end();
          return;
        }
        try {
          this.take(JSON.parse(text) as OtlpBody);
        } catch (err) {
          this.refused.push(`unreadable body: ${(err as Error).message}`);
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** Waits (up to `timeoutMs`) until the spans received include one for each predicate; answers them in that order. */
  async waitFor(predicates: Array<(s: ReceivedSpan) => boolean>, timeoutMs = 10_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = predicates.map((p) => this.spans.find(p));
      if (found.every((s) => s !== undefined)) return found as ReceivedSpan[];
      if (Date.now() > deadline) {
        const missing = predicates.map((_p, i) => (found[i] ? -1 : i)).filter((i) => i >= 0);
        const received = this.spans.map((s) => `${s.traceId}/${s.spanId}<-${s.parentSpanId || '-'} kind ${s.kind} ${s.name} ${JSON.stringify(s.attributes)}`);
        throw new Error(`spans not received within ${timeoutMs} ms: none for predicates ${missing.join(', ')} (of 0..${predicates.length - 1})\nreceived:\n${received.join('\n')}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private take(body: OtlpBody): void {
    for (const rs of body.resourceSpans ?? []) {
      const resource = flatten(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId ?? '', name: s.name, kind: s.kind ?? 0,
            statusCode: s.status?.code ?? 0, attributes: flatten(s.attributes), resource,
          });
        }
      }
    }
  }
}

function flatten(attributes: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
  }
  return out;
}
