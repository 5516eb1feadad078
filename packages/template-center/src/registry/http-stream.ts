import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { guardedLookup } from './hop-guard.ts';

export interface StreamGetOptions {
  headers: Record<string, string>;
  signal?: AbortSignal;
  /** Deadline for each response's headers; the body may take as long as it takes. */
  headerTimeoutMs: number;
  /** What to fail with when the headers do not come in time. */
  timeoutError: () => Error;
  maxRedirects?: number;
  /** What to fail with past maxRedirects. */
  tooManyRedirects?: () => Error;
  /** Throws when a redirect may not be followed to this URL (hop-guard.ts); asked before each hop. */
  checkHop?: (next: URL) => Promise<void>;
  /** Every connection to an address guardedLookup checked (a registry the operator did not name). */
  guarded?: boolean;
}

/**
 * Keep-alive agents whose connections are all made through guardedLookup, apart from node's
 * global ones: a pooled connection a guarded request reuses was checked when it was opened, and
 * one a trusted registry's pull opened is never lent to a guarded request. Idle ones go after
 * 5 s, as with the global agents.
 */
const GUARDED_AGENTS = {
  http: new HttpAgent({ keepAlive: true, timeout: 5_000, lookup: guardedLookup }),
  https: new HttpsAgent({ keepAlive: true, timeout: 5_000, lookup: guardedLookup }),
};

/** The URL each response of streamGet came from, after its redirects (node's client responses carry none). */
const answeredBy = new WeakMap<IncomingMessage, URL>();

/** Where a response of streamGet came from: the last URL of its redirects. */
export function responseUrl(res: IncomingMessage): URL | undefined {
  return answeredBy.get(res);
}

/** The statuses a redirect is followed on (fetch's set). */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The headers for a redirect's next hop: Authorization is dropped when the origin changes, as fetch does. */
function headersForHop(headers: Record<string, string>, from: URL, to: URL): Record<string, string> {
  if (to.origin === from.origin) return headers;
  const { authorization: _dropped, ...rest } = headers;
  return rest;
}

/**
 * A GET whose body is a plain Node stream: layer blobs are the bulk of a pull, and node:http
 * moves them with noticeably less CPU than fetch's web streams; manifests and tokens take the
 * same path, so that every connection can be made through guardedLookup (fetch resolves names
 * itself). Redirects are followed (registries
 * send blobs to a CDN or object store), dropping the Authorization header when the origin
 * changes, as fetch does. The final response is returned whatever its status; `signal` aborts it
 * until its body ends.
 */
export async function streamGet(url: string, o: StreamGetOptions): Promise<IncomingMessage> {
  let current = new URL(url);
  let headers = { ...o.headers };
  for (let hops = 0; ; hops++) {
    const res = await getOnce(current, headers, o);
    const location = res.headers.location;
    if (!REDIRECTS.has(res.statusCode ?? 0) || !location) {
      answeredBy.set(res, current);
      return res;
    }
    res.destroy();
    if (hops >= (o.maxRedirects ?? 5)) throw o.tooManyRedirects?.() ?? new Error(`too many redirects fetching ${url}`);
    const next = new URL(location, current);
    await o.checkHop?.(next);
    headers = headersForHop(headers, current, next);
    current = next;
  }
}

function getOnce(url: URL, headers: Record<string, string>, o: StreamGetOptions): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const { signal } = o;
    if (signal?.aborted) return reject(signal.reason);
    const tls = url.protocol === 'https:';
    const request = tls ? httpsRequest : httpRequest;
    const req = request(url, { method: 'GET', headers, ...(o.guarded ? { agent: tls ? GUARDED_AGENTS.https : GUARDED_AGENTS.http } : {}) });
    const onAbort = () => req.destroy(signal!.reason as Error);
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => req.destroy(o.timeoutError()), o.headerTimeoutMs);
    req.once('response', (res) => {
      clearTimeout(timer);
      // Aborting the job must also stop the body, so the listener stays until the body is done.
      res.once('close', () => signal?.removeEventListener('abort', onAbort));
      resolve(res);
    });
    // 'on', not 'once': a socket error after the response must not go unhandled.
    req.on('error', (err) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    req.end();
  });
}

/** The first `max` bytes of a response body as text (error details), the rest discarded. */
export async function readText(res: IncomingMessage, max = 64 * 1024): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      if (size < max) chunks.push(chunk);
      size += chunk.length;
    }
  } catch { /* a detail we could not read is no reason to hide the status */ }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
}
