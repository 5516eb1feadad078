/**
 * Where the SDK talks to and with which credentials: explicit options first, then the
 * SVC_* environment variables, then the local defaults of `svc up`.
 */
export const DEFAULT_API_URL = 'http://127.0.0.1:3000';
export const DEFAULT_SANDBOX_URL = 'http://127.0.0.1:3002';
export const DEFAULT_TEMPLATE = 'base';
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
export { ENVD_PORT } from '@svc/contracts/envd-port';
/** Pass as `timeoutMs` to make a sandbox never time out; sent to the API as -1 seconds. */
export const NEVER_TIMEOUT = -1;

export interface ConnectionOpts {
  /** API key, sent as `X-API-Key`. Default: env `SVC_API_KEY`. */
  apiKey?: string;
  /** Base URL of the API gateway. Default: env `SVC_API_URL`, else http://127.0.0.1:3000. */
  apiUrl?: string;
  /** Base URL of the data-plane proxy. Default: env `SVC_SANDBOX_URL`, else http://127.0.0.1:3002. */
  sandboxUrl?: string;
  /** Deadline of each request in milliseconds; 0 disables it. Default 60 000. */
  requestTimeoutMs?: number;
  /** Extra headers for API requests. */
  headers?: Record<string, string>;
  /** Cancels the in-flight request. */
  signal?: AbortSignal;
}

const env = (name: string): string | undefined => {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : v;
};

const trimSlash = (url: string) => url.replace(/\/+$/, '');

export class ConnectionConfig {
  readonly apiUrl: string;
  readonly apiKey?: string;
  readonly sandboxUrl: string;
  readonly requestTimeoutMs: number;
  readonly headers: Record<string, string>;
  readonly signal?: AbortSignal;

  constructor(opts: ConnectionOpts = {}) {
    this.apiUrl = trimSlash(opts.apiUrl ?? env('SVC_API_URL') ?? DEFAULT_API_URL);
    this.apiKey = opts.apiKey ?? env('SVC_API_KEY');
    this.sandboxUrl = trimSlash(opts.sandboxUrl ?? env('SVC_SANDBOX_URL') ?? DEFAULT_SANDBOX_URL);
    this.requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.headers = opts.headers ?? {};
    this.signal = opts.signal;
  }

  /** The connection options to hand on to another call (for example from a sandbox instance). */
  toOpts(): ConnectionOpts {
    return {
      apiUrl: this.apiUrl,
      apiKey: this.apiKey,
      sandboxUrl: this.sandboxUrl,
      requestTimeoutMs: this.requestTimeoutMs,
      headers: this.headers,
    };
  }

  /** A signal that fires after `requestTimeoutMs` (or the given override) or when `signal` aborts. */
  requestSignal(requestTimeoutMs?: number, signal?: AbortSignal): AbortSignal | undefined {
    const ms = requestTimeoutMs ?? this.requestTimeoutMs;
    const signals = [ms ? AbortSignal.timeout(ms) : undefined, signal ?? this.signal].filter((s): s is AbortSignal => !!s);
    if (signals.length === 0) return undefined;
    return signals.length === 1 ? signals[0] : AbortSignal.any(signals);
  }
}

export function defaultTemplate(): string {
  return env('SVC_TEMPLATE_ID') ?? DEFAULT_TEMPLATE;
}

/** Milliseconds to the API's seconds; NEVER_TIMEOUT stays -1 (plain rounding would make it 0). */
export function timeoutToSeconds(timeoutMs: number): number {
  if (timeoutMs === NEVER_TIMEOUT) return -1;
  return Math.ceil(timeoutMs / 1000);
}
