/**
 * OpenTelemetry traces (docs/observability.md, "Traces (OpenTelemetry)"). On when the standard
 * OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set and
 * OTEL_SDK_DISABLED is not `true`: then the maintained Node SDK is loaded and started once per
 * process, exporting OTLP/HTTP (JSON). Off, nothing of OpenTelemetry is loaded (the modules are
 * imported on start only) and every helper here is one check of a module variable.
 *
 * No auto-instrumentation: it needs loader flags under ESM, and svc's servers and clients are few
 * (http-tracing.ts, http-client.ts, the data-plane proxy), so the spans are made by hand.
 */
import type { Attributes, AttributeValue, Context, Span, Tracer } from '@opentelemetry/api';
import type { Logger } from './log.ts';

type OtelApi = typeof import('@opentelemetry/api');

/** The span attribute naming the sandbox a request is about. */
export const SANDBOX_ID_ATTRIBUTE = 'svc.sandbox.id';
/** The span attribute naming the template a create asks for. */
export const TEMPLATE_ID_ATTRIBUTE = 'svc.template.id';

interface Running {
  api: OtelApi;
  tracer: Tracer;
  sdk: { shutdown(): Promise<void> };
  flush(): Promise<void>;
  users: number;
}

/** Set while the SDK runs: the one check every helper makes. */
let on: Running | undefined;
let starting: Promise<Running | undefined> | undefined;

/** Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** Whether this process exports spans now. Callers on a hot path check it before building a span's arguments. */
export function tracingOn(): boolean {
  return on !== undefined;
}

/**
 * Starts the SDK for this process when the environment asks for traces (tracingWanted), once:
 * `svc up` calls it for the whole platform, a cluster's component for itself (runComponent).
 * `serviceName` is the default of the resource's service.name; OTEL_SERVICE_NAME, or a
 * service.name in OTEL_RESOURCE_ATTRIBUTES, wins. The answer's close flushes what is left
 * (the last holder's close shuts the SDK down). A failure to start is logged and leaves traces off.
 */
export async function startTracing(serviceName: string, logger: Logger): Promise<{ close(): Promise<void> }> {
  if (!tracingWanted()) return { close: async () => {} };
  serviceInUse ??= serviceName;
  starting ??= loadSdk(serviceName, logger).catch((err: Error) => {
    logger.error({ err: err.message }, 'OpenTelemetry did not start: this process exports no traces');
    starting = undefined;
    return undefined;
  });
  const running = await starting;
  if (!running) return { close: async () => {} };
  running.users++;
  let closed = false;
  return {
    close: async () => {
      if (closed) return;
      closed = true;
      if (--running.users > 0) return running.flush().catch((err: Error) => logger.warn({ err: err.message }, 'OpenTelemetry did not flush: the last spans may be lost'));
      await stopSdk(running, logger);
    },
  };
}

let serviceInUse: string | undefined;

/**
 * The service name this process's traces default to, once tracing started: its worker processes
 * (worker-pool.ts) take it too, since a worker is a part of the process that forked it.
 */
export function tracingServiceName(): string | undefined {
  return serviceInUse;
}

async function loadSdk(serviceName: string, logger: Logger): Promise<Running> {
  const [api, { NodeSDK }, { OTLPTraceExporter }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
  ]);
  // The SDK's own failures (a collector that does not answer) go to this process's log, unless
  // OTEL_LOG_LEVEL asks for the SDK's console logger (NodeSDK sets that one itself).
  if (!process.env.OTEL_LOG_LEVEL) api.diag.setLogger(diagLogger(logger), api.DiagLogLevel.WARN);
  const named = Boolean(process.env.OTEL_SERVICE_NAME?.trim()) || /(^|,)\s*service\.name\s*=/.test(process.env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const exporter = new OTLPTraceExporter();
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName }),
    traceExporter: exporter,
    // Traces only: metrics are Prometheus's (docs/observability.md), logs are pino's. Left out,
    // NodeSDK would start OTLP metric and log exporters of its own.
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
    // The propagators are OTEL_PROPAGATORS' (default: W3C tracecontext and baggage); the context
    // manager NodeSDK's AsyncLocalStorage one; the sampler OTEL_TRACES_SAMPLER's.
  });
  sdk.start();
  // The global provider is a proxy in front of the SDK's: the SDK's one flushes.
  const global = api.trace.getTracerProvider() as { getDelegate?: () => unknown };
  const provider = (global.getDelegate?.() ?? global) as { forceFlush?: () => Promise<void> };
  const running: Running = {
    api,
    tracer: api.trace.getTracer('svc'),
    sdk,
    flush: async () => { await provider.forceFlush?.(); },
    users: 0,
  };
  on = running;
  logger.info({ serviceName: named ? process.env.OTEL_SERVICE_NAME?.trim() || '(OTEL_RESOURCE_ATTRIBUTES)' : serviceName }, 'OpenTelemetry traces on (OTLP/HTTP)');
  return running;
}

async function stopSdk(running: Running, logger: Logger): Promise<void> {
  on = undefined;
  starting = undefined;
  await running.sdk.shutdown().catch((err: Error) => logger.warn({ err: err.message }, 'OpenTelemetry did not shut down cleanly: the last spans may be lost'));
  // Unregistered, so that a later startTracing in this process (tests) registers its own.
  running.api.trace.disable();
  running.api.context.disable();
  running.api.propagation.disable();
  running.api.diag.disable();
}

function diagLogger(logger: Logger) {
  const log = (level: 'error' | 'warn' | 'info' | 'debug') => (message: string, ...args: unknown[]) =>
    logger[level]({ otel: args.length > 0 ? args.map(String).join(' ') : undefined }, `OpenTelemetry: ${message}`);
  return { error: log('error'), warn: log('warn'), info: log('info'), debug: log('debug'), verbose: log('debug') };
}

/** Incoming headers as node gives them. */
type HeaderBag = Record<string, string | string[] | undefined>;

const headerGetter = {
  keys: (carrier: HeaderBag) => Object.keys(carrier),
  get: (carrier: HeaderBag, key: string) => carrier[key],
};

/**
 * One request's span and the context it is active in. Made by startServerSpan; the maker ends it.
 */
export class RequestSpan {
  constructor(
    private readonly running: Running,
    private readonly span: Span,
    private readonly context: Context,
  ) {}

  setAttribute(name: string, value: AttributeValue): void {
    this.span.setAttribute(name, value);
  }

  /** Runs `fn` with this span active: the calls it makes (JsonClient) carry it on. */
  run<T>(fn: () => T): T {
    return this.running.api.context.with(this.context, fn);
  }

  /** The headers that carry this span to the next hop (`traceparent`, and `tracestate` or `baggage` when there are). */
  headers(): Record<string, string> {
    const out: Record<string, string> = {};
    this.running.api.propagation.inject(this.context, out);
    return out;
  }

  /** An error that makes the answer a 5xx, on the span (a 4xx is the caller's, not an error here). */
  recordError(err: unknown): void {
    this.span.recordException(err instanceof Error ? err : String(err));
  }

  /** Ends the span with the answer's status (an error from 500 on), or none (no answer was sent: the client left, an upgrade ended). */
  end(status: number | undefined): void {
    if (status !== undefined) {
      this.span.setAttribute('http.response.status_code', status);
      if (status >= 500) this.span.setStatus({ code: this.running.api.SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

/**
 * A SERVER span for a request that came with `headers`, its parent the caller's W3C
 * `traceparent` (and `tracestate`), or a new trace. Undefined when tracing is off: callers on a
 * hot path check tracingOn() first, so that nothing is built for it.
 */
export function startServerSpan(name: string, headers: HeaderBag, attributes: Attributes): RequestSpan | undefined {
  const running = on;
  if (!running) return undefined;
  const { api } = running;
  const parent = api.propagation.extract(api.ROOT_CONTEXT, headers, headerGetter);
  const span = running.tracer.startSpan(name, { kind: api.SpanKind.SERVER, attributes }, parent);
  return new RequestSpan(running, span, api.trace.setSpan(parent, span));
}

/** The header names the propagators write (to drop a client's own before a span's are added); none when off. */
export function propagationFields(): string[] {
  return on ? on.api.propagation.fields() : [];
}

/** Sets an attribute on the active span (what a handler learns late: the sandbox a create made); nothing when off. */
export function setSpanAttribute(name: string, value: AttributeValue): void {
  if (!on) return;
  on.api.trace.getActiveSpan()?.setAttribute(name, value);
}

/**
 * One call to another component as a CLIENT span, child of the active span, whose context goes
 * out in `headers` (W3C `traceparent`). With no active span (a background task) the call is made
 * as it is: it starts no trace of its own; the callee's SERVER span does. Tracing off: `call()`.
 */
export async function traceClientCall<T>(method: string, url: string, headers: Record<string, string>, call: () => Promise<T>, statusOf: (answer: T) => number): Promise<T> {
  const running = on;
  if (!running) return call();
  const { api } = running;
  const active = api.context.active();
  if (!api.trace.getSpan(active)) return call();
  const span = running.tracer.startSpan(method, { kind: api.SpanKind.CLIENT, attributes: clientAttributes(method, url) }, active);
  const ctx = api.trace.setSpan(active, span);
  api.propagation.inject(ctx, headers);
  try {
    const answer = await api.context.with(ctx, call);
    const status = statusOf(answer);
    span.setAttribute('http.response.status_code', status);
    if (status >= 500) span.setStatus({ code: api.SpanStatusCode.ERROR });
    return answer;
  } catch (err) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: api.SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/** Method, the URL without its query (a signed URL's query is a credential), and the server. */
function clientAttributes(method: string, url: string): Attributes {
  const attributes: Attributes = { 'http.request.method': method, 'url.full': url.split('?')[0]! };
  try {
    const u = new URL(url);
    attributes['server.address'] = u.hostname;
    if (u.port) attributes['server.port'] = Number(u.port);
  } catch {
    // Not a URL fetch would take either: the call itself fails and says so.
  }
  return attributes;
}
