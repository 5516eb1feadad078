import type { IncomingMessage } from 'node:http';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { SvcError, toSvcError } from './errors.ts';
import type { Logger } from './log.ts';

export interface HttpAppOptions {
  logger: Logger;
  /** Largest accepted request body in bytes (default 1 MiB). */
  bodyLimit?: number;
}

/**
 * A fastify instance with svc's error conventions: every error is `{code, message}` with
 * a real HTTP status, malformed JSON and oversized bodies are 4xx, unknown routes are 404.
 */
export function createHttpApp(opts: HttpAppOptions): FastifyInstance {
  const bodyLimit = opts.bodyLimit ?? 1024 * 1024;
  const app = Fastify({
    loggerInstance: opts.logger.child({}, { level: 'warn' }) as unknown as FastifyBaseLogger,
    bodyLimit,
    return503OnClosing: true,
    forceCloseConnections: true,
  });
  // Empty bodies with a JSON content type are common from SDKs (POST /pause with no body).
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new SvcError(400, 'request body is not valid JSON'), undefined);
    }
  });
  app.setErrorHandler(async (err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const e = toSvcError(err);
    if (e.status >= 500 && !(err instanceof SvcError)) req.log.error({ err, url: req.url }, 'unhandled error');
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
  return app;
}

const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

function drainRequest(raw: IncomingMessage): Promise<void> {
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

export function sendError(reply: FastifyReply, e: SvcError): FastifyReply {
  for (const [k, v] of Object.entries(e.headers)) reply.header(k, v);
  return reply.status(e.status).type('application/json').send(e.toBody());
}

/** Splits "host:port" (or ":port", or a bare port) into parts for listen(). */
export function parseListen(addr: string, defaultHost = '127.0.0.1'): { host: string; port: number } {
  const m = /^(?:\[?([^\]]*?)\]?:)?(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`bad listen address: ${addr}`);
  return { host: m[1] || defaultHost, port: Number(m[2]) };
}
