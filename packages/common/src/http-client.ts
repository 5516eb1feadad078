import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { Agent, fetch as undiciFetch } from 'undici';
import { SvcError, isErrorBody, UnreachableError } from './errors.ts';
import { traceClientCall, tracingOn } from './tracing.ts';

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
    let body: string | undefined;
    if (ro.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(ro.body);
    }
    const timeoutMs = ro.timeoutMs ?? this.opts.timeoutMs;
    const init: RequestInit = { method, headers, body, redirect: ro.redirect };
    // A CLIENT span when tracing is on, and the `traceparent` header that carries it (tracing.ts).
    if (tracingOn()) return traceClientCall(method, url, headers, () => this.send(method, path, url, init, timeoutMs), (res) => res.status);
    return this.send(method, path, url, init, timeoutMs);
  }

  private async send(method: string, path: string, url: string, init: RequestInit, timeoutMs: number | undefined): Promise<Response> {
    const signal = timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined;
    try {
      if (timeoutMs && timeoutMs >= FETCH_DEFAULT_LIMIT_MS) return await patientFetch(url, { ...init, signal });
      return await fetch(url, { ...init, signal });
    } catch (err) {
      const e = err as Error;
      if (e.name === 'TimeoutError') throw new SvcError(504, `${method} ${path}: no answer within ${timeoutMs} ms`);
      throw new UnreachableError(`${method} ${this.baseUrl}${path}: ${(e.cause as Error)?.message ?? e.message}`, `${method} ${path}: a platform component did not answer; retry shortly`);
    }
  }

  /**
   * A request whose bodies are Node streams (bulk data: snapshot layers). node:http moves them
   * at several times the speed of fetch's web streams. The answer comes back whatever its
   * status; its body is the caller's to read or destroy.
   */
  stream(method: string, path: string, o: { body?: Readable; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<IncomingMessage> {
    const url = this.baseUrl + path;
    const headers = { ...this.opts.headers, ...o.headers };
    const timeoutMs = o.timeoutMs ?? this.opts.timeoutMs;
    if (tracingOn()) return traceClientCall(method, url, headers, () => this.streamOnce(method, path, url, headers, o.body, timeoutMs), (res) => res.statusCode ?? 0);
    return this.streamOnce(method, path, url, headers, o.body, timeoutMs);
  }

  private streamOnce(method: string, path: string, url: string, headers: Record<string, string>, body: Readable | undefined, timeoutMs: number | undefined): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, { method, headers });
      const timer = timeoutMs ? setTimeout(() => req.destroy(new SvcError(504, `${method} ${path}: no answer within ${timeoutMs} ms`)), timeoutMs) : undefined;
      req.once('response', (res) => { clearTimeout(timer); resolve(res); });
      // 'on', not 'once': a socket error after the answer must not go unhandled.
      req.on('error', (err) => {
        clearTimeout(timer);
        // The URL is internal: the public answer names only the call (UnreachableError).
        reject(err instanceof SvcError ? err : new UnreachableError(`${method} ${url}: ${err.message}`, `${method} ${path}: a platform component did not answer; retry shortly`));
      });
      if (body) {
        body.once('error', (err) => req.destroy(err));
        body.pipe(req);
      } else {
        req.end();
      }
    });
  }

  /** stream() for an answer that is JSON: non-2xx becomes an SvcError as request() does. */
  async streamJson<T>(method: string, path: string, o: { body?: Readable; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<T> {
    const res = await this.stream(method, path, o);
    const status = res.statusCode ?? 500;
    if (status < 200 || status > 299) throw await errorFromStream(res);
    const text = await readAll(res);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T>(path: string, ro?: RequestOptions) { return this.request<T>('GET', path, ro); }
  post<T>(path: string, body?: unknown, ro?: RequestOptions) { return this.request<T>('POST', path, { ...ro, body }); }
  put<T>(path: string, body?: unknown, ro?: RequestOptions) { return this.request<T>('PUT', path, { ...ro, body }); }
  delete<T>(path: string, ro?: RequestOptions) { return this.request<T>('DELETE', path, ro); }
}

/**
 * fetch's dispatcher gives up on an answer whose headers have not come within 300 s, and on a
 * body that stalls as long (undici's headersTimeout and bodyTimeout), whatever deadline the
 * caller set. A create waiting on a template build with master.create_timeout_insec above 300
 * failed in the API with a 503 at 300 s while the master went on, and started a sandbox nobody
 * was told of (stop 62's note). A request whose deadline passes that limit goes through a
 * dispatcher without those limits, bounded by its own deadline (the AbortSignal). It uses the
 * undici package's fetch with that package's Agent: Node's built-in fetch is a different undici,
 * and handing it a dispatcher from the package breaks across Node versions (undici PR #4827).
 */
const FETCH_DEFAULT_LIMIT_MS = 300_000;
let unlimited: Agent | undefined;

async function patientFetch(url: string, init: RequestInit): Promise<Response> {
  unlimited ??= new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  // Both Responses have the members callers use (status, ok, headers, text, json, body).
  return await undiciFetch(url, { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: unlimited }) as unknown as Response;
}

export function errorFromResponse(res: Response, text: string): SvcError {
  return errorFromStatus(res.status, (h) => res.headers.get(h) ?? undefined, text, res.statusText);
}

/** The SvcError a non-2xx answer read as a Node stream stands for (its body is read). */
export async function errorFromStream(res: IncomingMessage): Promise<SvcError> {
  const text = await readAll(res).catch((err: Error) => `(the answer's body could not be read: ${err.message})`);
  return errorFromStatus(res.statusCode ?? 500, (h) => res.headers[h] as string | undefined, text, res.statusMessage ?? '');
}

async function readAll(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function errorFromStatus(status: number, header: (name: string) => string | undefined, text: string, statusText: string): SvcError {
  let parsed: unknown;
  try { parsed = JSON.parse(text); } catch { /* not JSON */ }
  const headers: Record<string, string> = {};
  const retry = header('retry-after');
  if (retry) headers['Retry-After'] = retry;
  if (isErrorBody(parsed)) return new SvcError(status, parsed.message, { code: parsed.code, headers });
  return new SvcError(status, text.slice(0, 300) || statusText, { headers });
}
