/**
 * Errors that cross the wire. Every HTTP error body in svc is `{code, message}`:
 * `code` is one of the domain codes of docs/design.md, "Errors" where one applies (130400, 130404, 130409),
 * otherwise the HTTP status itself, which is what the official e2b SDK reads.
 */
export const ErrorCodes = {
  /** A bad template or volume request. */
  badRequest: 130400,
  /** No such template (id or alias); other 404s carry code 404. */
  templateNotFound: 130404,
  /** A volume in use, or a resume refused by the release-ratio policy. */
  conflict: 130409,
} as const;

const MAX_MESSAGE_CHARS = 2_000;

/** An error message as it crosses the wire: a message that quotes an oversized input is cut. */
export function boundedMessage(message: string): string {
  return message.length > MAX_MESSAGE_CHARS ? `${message.slice(0, MAX_MESSAGE_CHARS)}… (cut)` : message;
}

export interface ErrorBody {
  code: number;
  message: string;
}

export class SvcError extends Error {
  readonly status: number;
  readonly code: number;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, opts: { code?: number; headers?: Record<string, string> } = {}) {
    super(boundedMessage(message));
    this.name = 'SvcError';
    this.status = status;
    this.code = opts.code ?? status;
    this.headers = opts.headers ?? {};
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message };
  }
}

/**
 * A platform component that did not answer: 503 with Retry-After. `message` names where and why
 * (an address, the socket's error) for the logs and for callers inside the platform; a server
 * that answers the public (createHttpApp's publicFacing) sends `publicMessage` instead, which
 * names no address of the platform's.
 */
export class UnreachableError extends SvcError {
  constructor(message: string, readonly publicMessage: string) {
    super(503, message, { headers: { 'Retry-After': '2' } });
    this.name = 'UnreachableError';
  }
}

/**
 * `what: <the error>` as a new error of `status` (Retry-After 2): a platform component that did
 * not answer stays an UnreachableError, its public words prefixed too, so a server that answers
 * the public still names no address of the platform's when it passes the error on.
 */
export function wrapError(err: unknown, what: string, status = 503): SvcError {
  const headers = { 'Retry-After': '2' };
  // Whatever `status` the caller meant, a component that did not answer is a 503.
  if (err instanceof UnreachableError) return new UnreachableError(`${what}: ${err.message}`, `${what}: ${err.publicMessage}`);
  return new SvcError(status, `${what}: ${(err as Error)?.message ?? String(err)}`, { headers });
}

export const badRequest = (message: string, code?: number) => new SvcError(400, message, { code });
export const unauthorized = (message = 'unauthorized') => new SvcError(401, message);
export const forbidden = (message = 'forbidden') => new SvcError(403, message);
export const notFound = (message: string, code?: number) => new SvcError(404, message, { code });
export const conflict = (message: string, code?: number) => new SvcError(409, message, { code });
export const gone = (message: string) => new SvcError(410, message);
export const unavailable = (message: string, retryAfterSec?: number) =>
  new SvcError(503, message, retryAfterSec === undefined ? {} : { headers: { 'Retry-After': String(retryAfterSec) } });

/** Turns anything thrown into a wire error; unknown errors become a 500 without internals. */
export function toSvcError(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  const e = err as { statusCode?: number; code?: string; message?: string };
  // fastify's own errors (bad JSON, body too large, unsupported media type) carry statusCode
  if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new SvcError(e.statusCode, e.message ?? 'bad request');
  }
  return new SvcError(500, 'internal error');
}

export function isErrorBody(v: unknown): v is ErrorBody {
  return typeof v === 'object' && v !== null && typeof (v as ErrorBody).message === 'string' && typeof (v as ErrorBody).code === 'number';
}
