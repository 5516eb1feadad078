/**
 * How the SDK reaches a sandbox's envd: its port through the data plane (sandbox-port.ts), and on
 * top of that plain HTTP (for /files and /health), unary Connect calls and server streams.
 */
import { transportError } from '../api-client.ts';
import { readBodyText, readErrorBody } from '../bounded-body.ts';
import { ENVD_PORT } from '../config.ts';
import {
  ConnectError, InvalidArgumentError, SandboxError, SandboxNotFoundError, TimeoutError, errorFromConnect, errorFromHttp, type NotFoundError,
} from '../errors.ts';
import { MAX_MESSAGE_BYTES, PROTOCOL_VERSION_HEADER, TIMEOUT_HEADER, UNARY_CONTENT_TYPE, connectErrorFromJson } from './connect-protocol.ts';
import { sandboxPortHeaders, sandboxPortUrl, type SandboxTarget } from '../sandbox-port.ts';
import { RpcStream } from './rpc-stream.ts';
/** Asks envd to send keepalive messages on long streams (seconds), as the e2b SDK does. */
const KEEPALIVE_HEADER = 'Keepalive-Ping-Interval';
const KEEPALIVE_SECONDS = '50';

export type RequestBody = NonNullable<RequestInit['body']>;

export interface CallOpts {
  headers?: Record<string, string>;
  requestTimeoutMs?: number;
  signal?: AbortSignal;
  /**
   * The largest answer a unary call reads (default MAX_MESSAGE_BYTES, envd's own bound). A caller
   * that serves many at once (the gateway's /mcp tools) asks for less: each answer is buffered
   * whole and parsed, several times its size in heap.
   */
  maxBytes?: number;
}

export interface StreamOpts extends CallOpts {
  /** Lifetime of the stream in ms; 0 means none. */
  timeoutMs: number;
}

export interface HttpOpts extends CallOpts {
  query?: Record<string, string | undefined>;
  body?: RequestBody;
}

/** `Authorization` for envd's `user` option: Basic with the user name and an empty password. */
export function userHeader(user?: string): Record<string, string> {
  if (!user) return {};
  return { Authorization: `Basic ${Buffer.from(`${user}:`).toString('base64')}` };
}

export class EnvdTransport {
  constructor(private readonly target: SandboxTarget) {}

  get requestTimeoutMs(): number {
    return this.target.requestTimeoutMs;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return sandboxPortHeaders(this.target, ENVD_PORT, extra);
  }

  url(path: string, query?: Record<string, string | undefined>): string {
    return sandboxPortUrl(this.target, path, query);
  }

  /** A plain HTTP request to envd. Transport failures throw; HTTP errors are left to the caller. */
  async http(method: string, path: string, opts: HttpOpts = {}): Promise<Response> {
    const url = this.url(path, opts.query);
    const init: RequestInit & { duplex?: 'half' } = {
      method,
      headers: this.headers(opts.headers),
      body: opts.body,
      signal: this.signal(opts),
      // A sandbox's redirect is its answer (an error), never followed: where this SDK runs on a
      // platform host (the gateway's /mcp tools), it sent the host to any address.
      redirect: 'manual',
    };
    if (opts.body instanceof ReadableStream) init.duplex = 'half';
    try {
      return await fetch(url, init);
    } catch (err) {
      throw transportError(err, `${method} ${url}`);
    }
  }

  /** A unary Connect call, for example `('process.Process/List', {})`. */
  async unary<T>(procedure: string, message: unknown, opts: CallOpts = {}): Promise<T> {
    const maxBytes = answerBound(opts.maxBytes);
    const res = await this.http('POST', `/${procedure}`, {
      ...opts,
      headers: {
        ...opts.headers,
        'Content-Type': UNARY_CONTENT_TYPE,
        [PROTOCOL_VERSION_HEADER]: '1',
        ...(this.timeout(opts) ? { [TIMEOUT_HEADER]: String(this.timeout(opts)) } : {}),
      },
      body: JSON.stringify(message ?? {}),
    });
    if (!res.ok) {
      const text = await readErrorBody(res);
      let body: unknown = text;
      try { body = JSON.parse(text); } catch { /* not JSON */ }
      throw connectErrorFromJson(body, res.status) ?? dataPlaneError(res.status, text);
    }
    // One message, bounded as envd bounds the messages it takes: a sandbox answering without end
    // grew this process (the gateway's, in its /mcp tools) until it fell over.
    let text: string;
    try {
      text = await readBodyText(res, maxBytes, procedure);
    } catch (err) {
      if (err instanceof SandboxError) throw err;
      throw transportError(err, procedure);
    }
    if (!text) return {} as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new SandboxError(`${procedure}: envd answered with invalid JSON`, { status: res.status });
    }
  }

  /** A server-streaming Connect call; `handshake` bounds the wait for the first message. */
  stream<T>(procedure: string, message: unknown, opts: StreamOpts): RpcStream<T> {
    return new RpcStream<T>(this.url(`/${procedure}`), message, {
      headers: this.headers({ ...opts.headers, [KEEPALIVE_HEADER]: KEEPALIVE_SECONDS }),
      timeoutMs: opts.timeoutMs,
      handshakeTimeoutMs: this.timeout(opts),
      signal: opts.signal,
      httpError: dataPlaneError,
    });
  }

  private timeout(opts: CallOpts): number {
    return opts.requestTimeoutMs ?? this.target.requestTimeoutMs;
  }

  private signal(opts: CallOpts): AbortSignal | undefined {
    const ms = this.timeout(opts);
    const signals = [ms ? AbortSignal.timeout(ms) : undefined, opts.signal].filter((s): s is AbortSignal => !!s);
    if (signals.length === 0) return undefined;
    return signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  }
}

/** The bound of one answer: the caller's, which must be a positive number of bytes, else envd's own. */
function answerBound(maxBytes: number | undefined): number {
  if (maxBytes === undefined) return MAX_MESSAGE_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new InvalidArgumentError(`maxBytes must be a positive whole number of bytes, not ${maxBytes}`);
  return maxBytes;
}

/**
 * An HTTP error that did not come from envd itself but from the data plane in front of it:
 * unknown sandbox (404), killed or timed out (410), traffic token refused (403), sandbox
 * unreachable (502).
 */
export function dataPlaneError(status: number, body: string): SandboxError {
  const err = errorFromHttp(status, body, { notFound: SandboxNotFoundError });
  if (status === 502) {
    const detail = err.message === `HTTP ${status}` ? 'the sandbox is not reachable' : err.message;
    return new TimeoutError(`${detail}: it is probably not running anymore`, { status, code: err.code });
  }
  return err;
}

/** Turns a Connect error into the public error classes; other errors pass unchanged. */
export function mapEnvdError(err: unknown, opts: { notFound?: typeof NotFoundError } = {}): Error {
  if (err instanceof ConnectError) return errorFromConnect(err, opts);
  return err instanceof Error ? err : new SandboxError(String(err));
}
