import { STATUS_CODES, type IncomingMessage } from 'node:http';
import { Readable, type Duplex } from 'node:stream';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { SvcError, toSvcError, UnreachableError } from './errors.ts';
import type { Logger } from './log.ts';
import { compileValidator, schemaError } from './schema-validation.ts';
import { traceRequests } from './http-tracing.ts';
import { tracingOn } from './tracing.ts';

export interface HttpAppOptions {
  /** Its `component` binding (createLogger's, or a child's) names the server's spans' `svc.component`. */
  logger: Logger;
  /** Largest accepted request body in bytes (default 1 MiB). */
  bodyLimit?: number;
  /** Serve HTTPS with this key and certificate (cluster_tls: clusterTlsOf). */
  https?: { key: Buffer; cert: Buffer };
  /**
   * It answers the public (the API gateway): a platform component that did not answer is said in
   * words that name none of the platform's addresses (UnreachableError); the details are logged.
   * A function: for the requests it says yes to (the master: a team's call, which the gateway
   * passes on to the team).
   */
  publicFacing?: boolean | ((req: FastifyRequest) => boolean);
}

/**
 * A fastify instance with svc's error conventions: every error is `{code, message}` with
 * a real HTTP status, malformed JSON and oversized bodies are 4xx, unknown routes are 404.
 */
export function createHttpApp(opts: HttpAppOptions): FastifyInstance {
  const bodyLimit = opts.bodyLimit ?? 1024 * 1024;
  const app = Fastify({
    ...(opts.https ? { https: opts.https } : {}),
    loggerInstance: opts.logger.child({}, { level: 'warn' }) as unknown as FastifyBaseLogger,
    bodyLimit,
    return503OnClosing: true,
    forceCloseConnections: true,
    clientErrorHandler: answerClientError,
    // A route's schema (from its contract) is checked by schema-validation.ts; a refusal names the field.
    schemaErrorFormatter: (errors, dataVar) => schemaError(errors as Parameters<typeof schemaError>[0], dataVar),
    // The router's own refusals (bad percent-encoding, an overlong path parameter) in the same shape.
    frameworkErrors: (err, _req, reply) => {
      const e = err as { statusCode?: number; code?: string };
      const message = e.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is too long' : e.code === 'FST_ERR_BAD_URL' ? 'the URL is not validly percent-encoded' : err.message;
      sendError(reply, new SvcError(e.statusCode ?? 400, message));
    },
  });
  app.setValidatorCompiler(compileValidator);
  // Empty bodies with a JSON content type are common from SDKs (POST /pause with no body).
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    // JSON.parse copes with any depth, but JSON.stringify (forwarding, storing) recurses and overflows the stack.
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return done(new SvcError(400, `request body nests deeper than ${MAX_JSON_DEPTH} levels`), undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new SvcError(400, 'request body is not valid JSON'), undefined);
    }
  });
  app.setErrorHandler(async (err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const e = toSvcError(err);
    // The path, never the query: signed URLs and tokens travel there (build-file uploads, file URLs).
    if (e.status >= 500 && !(err instanceof SvcError)) req.log.error({ err, path: req.url?.split('?')[0] }, 'unhandled error');
    const isPublic = typeof opts.publicFacing === 'function' ? opts.publicFacing(req) : opts.publicFacing;
    if (isPublic && err instanceof UnreachableError) {
      req.log.warn({ err: err.message, path: req.url?.split('?')[0] }, 'a platform component did not answer');
      return sendError(reply, new SvcError(503, err.publicMessage, { headers: err.headers }));
    }
    // Answering while the client still uploads, then closing, resets the connection before the
    // client reads the answer: read (and drop) the rest of the body first, within bounds.
    if (e.status === 413) {
      await drainRequest(req.raw);
      return sendError(reply, new SvcError(413, `request body is larger than ${bodyLimit} bytes`));
    }
    return sendError(reply, e);
  });
  app.setNotFoundHandler((req, reply) => {
    sendError(reply, new SvcError(404, `no route for ${req.method} ${req.url.split('?')[0]}`));
  });
  // First of the hooks, so that the span covers the others (the gateway's authentication).
  if (tracingOn()) traceRequests(app, componentOf(opts.logger));
  const routes: ServedRoute[] = [];
  served.set(app, routes);
  app.addHook('onRoute', (r) => { routes.push({ method: r.method, url: r.url }); });
  return app;
}

function componentOf(logger: Logger): string {
  const bound = (logger.bindings() as { component?: unknown }).component;
  return typeof bound === 'string' ? bound : 'svc';
}

/** A route a server registered, as fastify's onRoute hook gives it (a GET brings its HEAD). */
export interface ServedRoute { method: string | string[]; url: string }

const served = new WeakMap<FastifyInstance, ServedRoute[]>();

/**
 * Every route registered on an app createHttpApp made, in any of its scopes: what a test holds
 * against the server's route table in packages/contracts (route-table.ts).
 */
export function servedRoutes(app: FastifyInstance): ServedRoute[] {
  return [...(served.get(app) ?? [])];
}

const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

/**
 * Reads and drops what is left of a request body (at most 256 MiB or 10 s): answering a client
 * that still uploads and then closing resets the connection before it reads the answer.
 */
export function drainRequest(raw: IncomingMessage): Promise<void> {
  if (raw.complete || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => { clearTimeout(timer); raw.off('data', onData); resolve(); };
    const onData = (chunk: Buffer) => { seen += chunk.length; if (seen > DRAIN_MAX_BYTES) done(); };
    const timer = setTimeout(done, DRAIN_MAX_MS);
    raw.on('data', onData);
    raw.once('end', done);
    raw.once('close', done);
    raw.once('error', done);
    raw.resume();
  });
}

const MAX_JSON_DEPTH = 100;

/** Whether JSON text opens more than `max` arrays or objects inside each other (strings skipped). */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) { if (++depth > max) return true; }
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/**
 * Bytes that never became a request (not HTTP, a header over the size limit, a timeout) get the
 * same `{code, message}` body as every other error, instead of fastify's own shape.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) { socket.destroy(err); return; }
  writeErrorOnSocket(socket, clientErrorAnswer(err));
}

/** The answer to bytes that never became a request, by the parser's error code. */
export function clientErrorAnswer(err: NodeJS.ErrnoException): SvcError {
  if (err.code === 'HPE_HEADER_OVERFLOW') return new SvcError(431, 'request headers are too large');
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return new SvcError(408, 'request timed out');
  return new SvcError(400, 'malformed HTTP request');
}

/** An error answer written on a raw socket (no response object: a client error or a refused upgrade), then the socket ends. */
export function writeErrorOnSocket(socket: Duplex, err: SvcError, extraHeaders: Record<string, string> = {}): void {
  const body = JSON.stringify(err.toBody());
  let head = `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n`;
  for (const [k, v] of Object.entries({ ...extraHeaders, ...err.headers })) head += `${k}: ${v}\r\n`;
  socket.end(`${head}\r\n${body}`);
}

export function sendError(reply: FastifyReply, e: SvcError): FastifyReply {
  for (const [k, v] of Object.entries(e.headers)) reply.header(k, v);
  return reply.status(e.status).type('application/json').send(e.toBody());
}

/**
 * Sends an answer fetched from another component back as this route's: its status, the named
 * headers, and its body streamed through (none for HEAD or 204).
 */
export function relayAnswer(req: FastifyRequest, reply: FastifyReply, res: Response, passHeaders: readonly string[]): FastifyReply {
  reply.status(res.status);
  for (const h of passHeaders) {
    const v = res.headers.get(h);
    if (v) reply.header(h, v);
  }
  if (!res.body || req.method === 'HEAD' || res.status === 204) return reply.send();
  return reply.send(Readable.fromWeb(res.body as never));
}
