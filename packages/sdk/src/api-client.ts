/**
 * The REST client for the API gateway: JSON in and out, `X-API-Key`, request deadlines,
 * and non-2xx answers turned into the typed errors of errors.ts.
 */
import { ConnectionConfig, type ConnectionOpts } from './config.ts';
import { SandboxError, TimeoutError, errorFromHttp, type ErrorClass, type NotFoundError } from './errors.ts';

export interface ApiRequest {
  body?: unknown;
  query?: Record<string, string | number | boolean | string[] | undefined>;
  /** Error class for a 404 answer. */
  notFound?: typeof NotFoundError;
  /** Error classes for other statuses, instead of the usual ones (errors.ts). */
  errorClasses?: Partial<Record<number, ErrorClass>>;
  requestTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  data: T;
}

export class ApiClient {
  readonly config: ConnectionConfig;

  constructor(opts: ConnectionOpts | ConnectionConfig = {}) {
    this.config = opts instanceof ConnectionConfig ? opts : new ConnectionConfig(opts);
  }

  async get<T>(path: string, req: ApiRequest = {}) { return (await this.request<T>('GET', path, req)).data; }
  async post<T>(path: string, req: ApiRequest = {}) { return (await this.request<T>('POST', path, req)).data; }
  async put<T>(path: string, req: ApiRequest = {}) { return (await this.request<T>('PUT', path, req)).data; }
  async delete<T>(path: string, req: ApiRequest = {}) { return (await this.request<T>('DELETE', path, req)).data; }

  /** Sends one request; a non-2xx answer throws. */
  async request<T>(method: string, path: string, req: ApiRequest = {}): Promise<ApiResponse<T>> {
    const url = this.config.apiUrl + path + queryString(req.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.config.headers };
    if (this.config.apiKey) headers['x-api-key'] = this.config.apiKey;
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const signal = this.config.requestSignal(req.requestTimeoutMs, req.signal);
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body, signal });
    } catch (err) {
      throw transportError(err, `${method} ${url}`);
    }
    const text = await res.text().catch((err: unknown) => {
      if (res.ok) throw transportError(err, `${method} ${url}`);
      /* the error answer's body was cut off: the status alone makes the error */
      return '';
    });
    if (!res.ok) {
      throw errorFromHttp(res.status, text, {
        notFound: req.notFound,
        classes: req.errorClasses,
        retryAfter: res.headers.get('retry-after'),
        fallbackMessage: `${method} ${path}: HTTP ${res.status} ${res.statusText}`,
      });
    }
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        throw new SandboxError(`${method} ${path}: the server answered with invalid JSON`, { status: res.status });
      }
    }
    return { status: res.status, headers: res.headers, data: data as T };
  }
}

function queryString(query: ApiRequest['query']): string {
  if (!query) return '';
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined) continue;
    q.set(k, Array.isArray(v) ? v.join(',') : String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** A fetch that never got an answer: a deadline, an abort, or an unreachable server. */
export function transportError(err: unknown, what: string): SandboxError {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return new TimeoutError(`${what}: no answer before the request timeout ('requestTimeoutMs')`, { code: 'timeout' });
  if (e?.name === 'AbortError') return new SandboxError(`${what}: aborted`, { code: 'aborted' });
  const cause = e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
  return new SandboxError(`${what}: cannot connect (${cause})`, { code: 'unreachable' });
}
