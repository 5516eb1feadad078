/**
 * Error classes, shaped like the e2b SDK's. Every error carries the HTTP status of the
 * answer that caused it (`status`, also readable as e2b's `statusCode`) and the server's
 * `code`: the number from a REST `{code, message}` body, or the Connect code string
 * (`not_found`, `deadline_exceeded`, ...) from envd.
 */
import { ErrorCodes } from '@svc/common/errors';

export interface ErrorDetails {
  status?: number;
  code?: number | string;
}

export class SandboxError extends Error {
  status?: number;
  code?: number | string;

  constructor(message?: string, details: ErrorDetails = {}) {
    super(message);
    this.name = new.target.name;
    this.status = details.status;
    this.code = details.code;
  }

  /** e2b's name for `status`. */
  get statusCode(): number | undefined {
    return this.status;
  }
}

export class TimeoutError extends SandboxError {}
export class InvalidArgumentError extends SandboxError {}
export class NotEnoughSpaceError extends SandboxError {}
export class NotFoundError extends SandboxError {}
export class FileNotFoundError extends NotFoundError {}
export class SandboxNotFoundError extends NotFoundError {}
export class TemplateNotFoundError extends NotFoundError {}
export class VolumeNotFoundError extends NotFoundError {}
export class AuthenticationError extends SandboxError {}
/**
 * The API refused the request and no more specific class says why: the volume routes' 400 (code
 * 130400: unknown driver, a name taken) is one. Client-side checks throw InvalidArgumentError instead.
 */
export class ApiError extends SandboxError {}
/** 409: the request conflicts with the resource's state (a volume still mounted: code 130409). */
export class ConflictError extends ApiError {}
/** The sandbox is being killed, was killed or timed out: retrying will not help. */
export class GoneError extends SandboxError {}
export class RateLimitError extends SandboxError {}
export class TemplateError extends SandboxError {}
/** 503: the platform is busy (for example a delete while the sandbox is pausing). */
export class ServiceBusyError extends SandboxError {
  /** Seconds from the `Retry-After` header, when the server sent one. */
  retryAfterSec?: number;
}

export interface CommandResult {
  exitCode: number;
  error?: string;
  stdout: string;
  stderr: string;
}

/** Thrown by `commands.run` and `CommandHandle.wait` when the command exits non-zero. */
export class CommandExitError extends SandboxError implements CommandResult {
  private readonly result: CommandResult;

  constructor(result: CommandResult) {
    super(result.error || `command exited with code ${result.exitCode}`);
    this.result = result;
  }
  get exitCode() { return this.result.exitCode; }
  get error() { return this.result.error; }
  get stdout() { return this.result.stdout; }
  get stderr() { return this.result.stderr; }
}

export type ErrorClass = new (message: string, details: ErrorDetails) => SandboxError;

const byStatus: Record<number, ErrorClass> = {
  400: InvalidArgumentError,
  401: AuthenticationError,
  403: AuthenticationError,
  404: NotFoundError,
  408: TimeoutError,
  409: ConflictError,
  410: GoneError,
  429: RateLimitError,
  503: ServiceBusyError,
  504: TimeoutError,
  507: NotEnoughSpaceError,
};

/**
 * Maps a non-2xx REST answer to an error. `notFound` picks the 404 class for the
 * resource at hand (sandbox, template, file); `classes` overrides the class of other statuses.
 */
export function errorFromHttp(
  status: number,
  body: unknown,
  opts: { notFound?: ErrorClass; classes?: Partial<Record<number, ErrorClass>>; retryAfter?: string | null; fallbackMessage?: string } = {},
): SandboxError {
  const parsed = parseErrorBody(body);
  const message = parsed.message || opts.fallbackMessage || `HTTP ${status}`;
  const Cls = status === 404 && opts.notFound ? opts.notFound
    // The platform names a missing template by its code on every route (docs/design.md, "Errors"):
    // a create from one, too, whose 404 could otherwise be a volume's.
    : status === 404 && parsed.code === ErrorCodes.templateNotFound ? TemplateNotFoundError
    : opts.classes?.[status] ?? byStatus[status] ?? SandboxError;
  const err = new Cls(message, { status, code: parsed.code ?? status });
  if (err instanceof ServiceBusyError && opts.retryAfter) {
    const sec = Number(opts.retryAfter);
    if (Number.isFinite(sec)) err.retryAfterSec = sec;
  }
  return err;
}

/**
 * An error reported inside a 2xx answer (one fork's outcome, `{code, message}`): mapped to the
 * class its code would have as an answer's status, as e2b maps it. A code that is no HTTP status
 * gives a plain SandboxError carrying it.
 */
export function errorFromBody(body: { code?: number; message?: string } | undefined, fallbackMessage: string): SandboxError {
  const code = body?.code;
  if (typeof code === 'number' && Number.isInteger(code) && code >= 400 && code <= 599) {
    return errorFromHttp(code, body, { fallbackMessage });
  }
  return new SandboxError(body?.message || fallbackMessage, { code });
}

function parseErrorBody(body: unknown): { code?: number | string; message?: string } {
  if (typeof body === 'string') {
    const text = body.trim();
    if (!text) return {};
    try {
      return parseErrorBody(JSON.parse(text));
    } catch {
      return { message: text.length > 500 ? `${text.slice(0, 500)}…` : text };
    }
  }
  if (typeof body !== 'object' || body === null) return {};
  const b = body as { code?: unknown; message?: unknown; error?: unknown };
  const code = typeof b.code === 'number' || typeof b.code === 'string' ? b.code : undefined;
  const message = typeof b.message === 'string' ? b.message : typeof b.error === 'string' ? b.error : undefined;
  return { code, message };
}

/** Connect protocol error codes (https://connectrpc.com/docs/protocol#error-codes). */
export type ConnectCode =
  | 'canceled' | 'unknown' | 'invalid_argument' | 'deadline_exceeded' | 'not_found' | 'already_exists'
  | 'permission_denied' | 'resource_exhausted' | 'failed_precondition' | 'aborted' | 'out_of_range'
  | 'unimplemented' | 'internal' | 'unavailable' | 'data_loss' | 'unauthenticated';

/** An error answered by envd in the Connect protocol, before it is mapped to a public class. */
export class ConnectError extends Error {
  readonly connectCode: ConnectCode;
  readonly status?: number;
  constructor(connectCode: ConnectCode, message: string, status?: number) {
    super(message);
    this.name = 'ConnectError';
    this.connectCode = connectCode;
    this.status = status;
  }
}

const byConnectCode: Partial<Record<ConnectCode, ErrorClass>> = {
  invalid_argument: InvalidArgumentError,
  unauthenticated: AuthenticationError,
  permission_denied: AuthenticationError,
  not_found: NotFoundError,
  already_exists: ConflictError,
  resource_exhausted: RateLimitError,
  unavailable: TimeoutError,
  canceled: TimeoutError,
  deadline_exceeded: TimeoutError,
};

const connectHints: Partial<Record<ConnectCode, string>> = {
  unavailable: 'the sandbox is probably not running anymore',
  canceled: "the request exceeded 'requestTimeoutMs'",
  deadline_exceeded: "the operation exceeded 'timeoutMs' (pass timeoutMs: 0 to disable it)",
};

/** Maps an envd (Connect) error to a public class; `notFound` overrides the 404 class. */
export function errorFromConnect(err: ConnectError, opts: { notFound?: ErrorClass } = {}): SandboxError {
  const Cls = err.connectCode === 'not_found' && opts.notFound ? opts.notFound : byConnectCode[err.connectCode] ?? SandboxError;
  const hint = connectHints[err.connectCode];
  const message = hint ? `${err.message}: ${hint}` : err.message;
  return new Cls(message, { status: err.status, code: err.connectCode });
}
