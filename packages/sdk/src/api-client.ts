/**
 * The REST client for the API gateway: JSON in and out, `X-API-Key`, request deadlines,
 * and non-2xx answers turned into the typed errors of errors.ts.
 *
 * Typed by the public OpenAPI document (@svc/contracts, public-api-operations.ts): `call` takes a
 * method and one of the document's path templates for it (another path does not compile), fills
 * and URL-encodes the template's `{name}`s from `params`, takes the body the document's
 * requestBody describes and answers what its 2xx response describes. `request` is the same for the
 * few routes the document lacks, typed by off-document-routes.ts.
 */
import type { PublicAnswer, PublicBody, PublicJsonPath, PublicMethod, PublicPathParams } from '@svc/contracts/public-api-operations';
import { readBodyText, readErrorBody } from './bounded-body.ts';
import { ConnectionConfig, type ConnectionOpts } from './config.ts';
import { InvalidArgumentError, SandboxError, TimeoutError, errorFromHttp, type ErrorClass, type NotFoundError } from './errors.ts';
import type { OffDocumentPath, OffDocumentRoute } from './off-document-routes.ts';

/** What any call takes besides its path, parameters and body. */
export interface ApiRequest {
  /**
   * Not checked against the document, whose query parameters' names its type does not keep. A list
   * is sent joined with commas (`state=running,paused`, the document's form); a URLSearchParams is
   * sent as it is, for a route that takes a name repeated instead (`types=a&types=b`).
   */
  query?: Record<string, string | number | boolean | string[] | undefined> | URLSearchParams;
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

/** A path template's parameters, or none for a template without `{name}`s. */
type ParamsOf<P extends string> = [keyof PublicPathParams<P>] extends [never] ? { params?: undefined } : { params: PublicPathParams<P> };
/** The options of `call`: the parameters and body of the document's operation. */
type CallOptions<M extends PublicMethod, P extends PublicJsonPath<M>> = ApiRequest & ParamsOf<P> & PublicBody<M, P>;
/** The options of `request`: the parameters and body of the off-document table's route. */
type RequestOptions<M extends PublicMethod, P extends string> = ApiRequest & ParamsOf<P>
  & (OffDocumentRoute<M, P> extends { body: infer B } ? { body: B } : { body?: undefined });
/** The options argument, optional when nothing in it is required. */
type OptionsArg<O> = object extends O ? [opts?: O] : [opts: O];

/** The largest API answer read: far past any listing the API pages (its pages are 100s of items). */
const MAX_API_ANSWER_BYTES = 64 * 1024 * 1024;

export class ApiClient {
  readonly config: ConnectionConfig;

  constructor(opts: ConnectionOpts | ConnectionConfig = {}) {
    this.config = opts instanceof ConnectionConfig ? opts : new ConnectionConfig(opts);
  }

  /** One operation of the public document; a non-2xx answer throws. */
  async call<M extends PublicMethod, P extends PublicJsonPath<M>>(method: M, path: P, ...[opts]: OptionsArg<CallOptions<M, P>>): Promise<PublicAnswer<M, P>> {
    return (await this.callWithResponse(method, path, ...([opts] as OptionsArg<CallOptions<M, P>>))).data;
  }

  /** `call`, with the answer's status and headers (X-Next-Token, ...). */
  async callWithResponse<M extends PublicMethod, P extends PublicJsonPath<M>>(method: M, path: P, ...[opts]: OptionsArg<CallOptions<M, P>>): Promise<ApiResponse<PublicAnswer<M, P>>> {
    const o: ApiRequest & { params?: Record<string, string>; body?: unknown } = opts ?? {};
    // the document's type is the answer's: the gateway serializes its answers with the same schemas
    return this.send(method, fillPath(path, o.params), o.body, o) as Promise<ApiResponse<PublicAnswer<M, P>>>;
  }

  /**
   * A route the public document does not describe (off-document-routes.ts says which and why),
   * typed by that table instead; a non-2xx answer throws.
   */
  async request<M extends PublicMethod, P extends OffDocumentPath<M>>(method: M, path: P, ...[opts]: OptionsArg<RequestOptions<M, P>>): Promise<OffDocumentRoute<M, P>['answer']> {
    const o: ApiRequest & { params?: Record<string, string>; body?: unknown } = opts ?? {};
    // on trust: the table's hand-written type, no schema behind it
    return (await this.send(method, fillPath(path, o.params), o.body, o)).data as OffDocumentRoute<M, P>['answer'];
  }

  /** Sends one request to `path` (filled in), JSON `body` when defined; a non-2xx answer throws. */
  private async send(method: string, path: string, reqBody: unknown, req: ApiRequest): Promise<ApiResponse<unknown>> {
    const url = this.config.apiUrl + path + queryString(req.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.config.headers };
    if (this.config.apiKey) headers['x-api-key'] = this.config.apiKey;
    let body: string | undefined;
    if (reqBody !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(reqBody);
    }
    const signal = this.config.requestSignal(req.requestTimeoutMs, req.signal);
    let res: Response;
    try {
      // A redirect is not followed: fetch would send the X-API-Key header along to wherever it points.
      res = await fetch(url, { method, headers, body, signal, redirect: 'manual' });
    } catch (err) {
      throw transportError(err, `${method} ${url}`);
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => { /* the answer is refused whatever its body; an error cancelling it changes nothing */ });
      const location = res.headers.get('location');
      throw new SandboxError(`${method} ${path}: the API answered with a redirect (HTTP ${res.status}${location ? ` to ${location}` : ''}), `
        + 'which is not followed so that the API key goes nowhere else: check apiUrl', { status: res.status });
    }
    if (!res.ok) {
      throw errorFromHttp(res.status, await readErrorBody(res), {
        notFound: req.notFound,
        classes: req.errorClasses,
        retryAfter: res.headers.get('retry-after'),
        fallbackMessage: `${method} ${path}: HTTP ${res.status} ${res.statusText}`,
      });
    }
    // Bounded: an answer without end (a broken proxy, a wrong apiUrl) grew the caller until it fell over.
    const text = await readBodyText(res, MAX_API_ANSWER_BYTES, `${method} ${path}`).catch((err: unknown) => {
      if (err instanceof SandboxError) throw err;
      throw transportError(err, `${method} ${url}`);
    });
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        throw new SandboxError(`${method} ${path}: the server answered with invalid JSON`, { status: res.status });
      }
    }
    return { status: res.status, headers: res.headers, data };
  }
}

/**
 * A path template with each `{name}` replaced by its parameter, URL-encoded as one path segment
 * (encodeURIComponent: a `/` in a value stays inside the segment). In the path (not a template's
 * query), an empty value, `.` and `..` are refused: encodeURIComponent leaves them as they are, and
 * the URL they make names another resource (`/sandboxes/..` is the API's root).
 */
function fillPath(template: string, params: Record<string, string> | undefined): string {
  const queryAt = template.indexOf('?');
  return template.replace(/\{([^{}]+)\}/g, (_, name: string, offset: number) => {
    const value = params?.[name];
    if (typeof value !== 'string') throw new InvalidArgumentError(`${template}: no value for the path parameter ${name}`);
    const inPath = queryAt === -1 || offset < queryAt;
    if (inPath && (value === '' || value === '.' || value === '..')) {
      throw new InvalidArgumentError(`${template}: ${value === '' ? 'an empty' : `'${value}' is not a valid`} ${name}`);
    }
    return encodeURIComponent(value);
  });
}

function queryString(query: ApiRequest['query']): string {
  if (!query) return '';
  if (query instanceof URLSearchParams) {
    const s = query.toString();
    return s ? `?${s}` : '';
  }
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
