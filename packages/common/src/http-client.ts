import { SvcError, isErrorBody } from './errors.ts';

export interface JsonClientOptions {
  headers?: Record<string, string>;
  /** Per-request deadline; a request past it fails with a 504 SvcError. */
  timeoutMs?: number;
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  query?: Record<string, string | number | boolean | undefined>;
  /** A raw body streamed as it is (application/octet-stream), instead of `body` as JSON. */
  stream?: ReadableStream<Uint8Array>;
  /** 'manual' hands a 3xx back to the caller instead of following it (and sending our headers along). */
  redirect?: 'follow' | 'manual' | 'error';
}

/**
 * A small typed JSON client over fetch, used by every component to call another.
 * Non-2xx answers become SvcError with the callee's status, code and message, so an
 * error from a node agent can travel unchanged to the API caller.
 */
export class JsonClient {
  readonly baseUrl: string;
  private readonly opts: JsonClientOptions;

  constructor(baseUrl: string, opts: JsonClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.opts = opts;
  }

  async request<T>(method: string, path: string, ro: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, ro);
    const text = await res.text();
    if (!res.ok) throw errorFromResponse(res, text);
    if (!text) return undefined as T;
    return JSON.parse(text) as T;
  }

  async raw(method: string, path: string, ro: RequestOptions = {}): Promise<Response> {
    let url = this.baseUrl + path;
    if (ro.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(ro.query)) if (v !== undefined) q.set(k, String(v));
      const s = q.toString();
      if (s) url += (url.includes('?') ? '&' : '?') + s;
    }
    const headers: Record<string, string> = { ...this.opts.headers, ...ro.headers };
    let body: string | ReadableStream<Uint8Array> | undefined;
    if (ro.stream) {
      headers['content-type'] = 'application/octet-stream';
      body = ro.stream;
    } else if (ro.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(ro.body);
    }
    const timeoutMs = ro.timeoutMs ?? this.opts.timeoutMs;
    const signal = timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined;
    try {
      // duplex 'half' is what fetch asks of a streamed request body.
      return await fetch(url, { method, headers, body, signal, redirect: ro.redirect, ...(ro.stream ? { duplex: 'half' } : {}) } as RequestInit);
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError') throw new SvcError(504, `${method} ${path}: no answer within ${timeoutMs} ms`);
      throw new SvcError(503, `${method} ${this.baseUrl}${path}: ${(e.cause as Error)?.message ?? e.message}`);
    }
  }

  get<T>(path: string, ro?: RequestOptions) { return this.request<T>('GET', path, ro); }
  post<T>(path: string, body?: unknown, ro?: RequestOptions) { return this.request<T>('POST', path, { ...ro, body }); }
  put<T>(path: string, body?: unknown, ro?: RequestOptions) { return this.request<T>('PUT', path, { ...ro, body }); }
  delete<T>(path: string, ro?: RequestOptions) { return this.request<T>('DELETE', path, ro); }
}

export function errorFromResponse(res: Response, text: string): SvcError {
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { /* not JSON */ }
  const headers: Record<string, string> = {};
  const retry = res.headers.get('retry-after');
  if (retry) headers['Retry-After'] = retry;
  if (isErrorBody(parsed)) return new SvcError(res.status, parsed.message, { code: parsed.code, headers });
  return new SvcError(res.status, text.slice(0, 300) || res.statusText, { headers });
}
