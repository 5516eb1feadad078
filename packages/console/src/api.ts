/**
 * The console's client of the public REST (docs/api.md): every call carries the signed-in key,
 * so a page shows exactly what that key may see. Errors keep the platform's status, code and
 * message (the JSON error body of docs/api.md) for the page to show.
 */

export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

type Query = Record<string, string | number | boolean | undefined | string[]>;

export class Api {
  constructor(readonly key: string, private readonly base = '') {}

  get<T>(path: string, query?: Query): Promise<T> {
    return this.call<T>('GET', path, undefined, query);
  }

  /** A paged list (E2B's `limit` and `nextToken`): the page and the token of the next, from the `x-next-token` header. */
  async getPage<T>(path: string, query?: Query): Promise<{ items: T[]; nextToken: string | undefined }> {
    let next: string | undefined;
    const items = await this.call<T[]>('GET', path, undefined, query, (res) => { next = res.headers.get('x-next-token') ?? undefined; });
    return { items: items ?? [], nextToken: next || undefined };
  }

  post<T>(path: string, body?: unknown, query?: Query): Promise<T> {
    return this.call<T>('POST', path, body ?? {}, query);
  }

  patch<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>('PATCH', path, body);
  }

  put<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>('PUT', path, body);
  }

  delete<T = void>(path: string, body?: unknown): Promise<T> {
    return this.call<T>('DELETE', path, body);
  }

  async call<T>(method: string, path: string, body?: unknown, query?: Query, onResponse?: (res: Response) => void): Promise<T> {
    const headers: Record<string, string> = { 'X-API-Key': this.key };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const url = this.base + path + queryString(query);
    const init = { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) };
    let res: Response;
    try {
      res = await fetch(url, init);
    } catch (err) {
      // A read is asked once more after a network failure: Chrome aborts the requests in flight
      // when the machine's addresses change (net::ERR_NETWORK_CHANGED: a laptop changing network,
      // or sandboxes' interfaces coming and going on the host the browser runs on), and a page
      // should not show an error for that. A write is never repeated: it may have been done.
      if (method !== 'GET') throw networkError(err);
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      try {
        res = await fetch(url, init);
      } catch (again) {
        throw networkError(again);
      }
    }
    onResponse?.(res);
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON (a proxy's page in front of svc): shown as text below.
      json = undefined;
    }
    if (!res.ok) {
      const e = (json ?? {}) as { code?: string | number; message?: string; error?: string };
      throw new ApiError(res.status, String(e.error ?? e.code ?? res.status), e.message ?? (text.slice(0, 200) || res.statusText));
    }
    return json as T;
  }
}

/** The pause before a failed read is asked again: long enough for a network change to settle. */
const RETRY_MS = 300;

function networkError(err: unknown): ApiError {
  return new ApiError(0, 'network', `the API did not answer: ${(err as Error).message}`);
}

function queryString(q?: Query): string {
  if (!q) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === '') continue;
    if (Array.isArray(v)) for (const item of v) params.append(k, item);
    else params.set(k, String(v));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
}

/** The message a page shows for a failed call. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.status ? `${err.message} (${err.status}${err.code && err.code !== String(err.status) ? ` ${err.code}` : ''})` : err.message;
  return (err as Error)?.message ?? String(err);
}
