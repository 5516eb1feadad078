import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { MANIFEST_ACCEPT, MediaTypes } from '../image/oci-types.ts';
import { parseChallenge, type AuthChallenge } from './challenge.ts';
import { hopRefusal } from './hop-guard.ts';
import { headersForHop, readText, REDIRECTS, streamGet } from './http-stream.ts';
import { apiHost, isLoopbackRegistry, type ImageReference } from './reference.ts';
import { distributionErrorCode, RegistryError } from './registry-error.ts';

interface RegistryCredentials { username: string; password: string }

export interface RegistryClientOptions {
  auth?: RegistryCredentials;
  /**
   * Plain HTTP when true, HTTPS when false; unset: plain HTTP for a registry on loopback
   * (localhost, 127.0.0.0/8, ::1), as Docker does, and HTTPS for every other host.
   */
  insecure?: boolean;
  signal?: AbortSignal;
  /**
   * The operator named this registry (template_center.host_registries, a mirror): it may send
   * the pull anywhere, into the host included. Otherwise every redirect and token realm is
   * checked by hopRefusal (hop-guard.ts).
   */
  trusted?: boolean;
  /** Why a redirect or a token realm may not be followed to a URL; default: as `trusted` says. */
  hopRefusal?: (next: URL) => Promise<string | undefined>;
}

export interface FetchedManifest {
  digest: string;
  mediaType?: string;
  body: Buffer;
  doc: unknown;
}

const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const RETRIES = 3;
/** fetch's own limit when it follows redirects. */
const MAX_REDIRECTS = 20;
const HEADER_TIMEOUT_MS = 60_000;

/**
 * A client for one repository on an OCI distribution (v2) registry. It answers the registry's
 * authentication challenge itself: Basic credentials, or the Bearer token flow (token endpoint
 * from the challenge, anonymous or with Basic credentials), and re-authenticates once whenever a
 * token expires in the middle of a pull.
 */
export class RegistryClient {
  private readonly base: string;
  private authorization: string | undefined;
  readonly where: string;

  constructor(readonly ref: ImageReference, private readonly opts: RegistryClientOptions = {}) {
    this.base = `${(opts.insecure ?? isLoopbackRegistry(ref.registry)) ? 'http' : 'https'}://${apiHost(ref.registry)}/v2/${ref.repository}`;
    this.where = `${ref.registry}/${ref.repository}`;
  }

  async manifest(reference: string): Promise<FetchedManifest> {
    const res = await this.request(`/manifests/${reference}`, { accept: MANIFEST_ACCEPT });
    if (!res.ok) throw await this.manifestError(res, reference);
    const body = await readLimited(res.body, Number(res.headers.get('content-length') ?? '0'), MAX_MANIFEST_BYTES, `manifest ${reference}`);
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (reference.startsWith('sha256:') && reference !== digest) {
      throw new RegistryError(`manifest ${reference} from ${this.where} digest mismatch: content hashes to ${digest}`);
    }
    let doc: unknown;
    try { doc = JSON.parse(body.toString('utf8')); } catch { throw new RegistryError(`manifest ${reference} from ${this.where} is not valid JSON`); }
    const mediaType = (doc as { mediaType?: string }).mediaType || res.headers.get('content-type')?.split(';')[0] || undefined;
    if (mediaType === MediaTypes.dockerSchema1 || mediaType === MediaTypes.dockerSchema1Signed || (doc as { schemaVersion?: number }).schemaVersion === 1) {
      throw new RegistryError(`${this.where}:${reference} uses the Docker schema 1 manifest format, which is not supported; push it again with a current client`);
    }
    return { digest, mediaType, body, doc };
  }

  /** Small blob (image config) read whole and verified. */
  async blobBytes(digest: string, maxBytes = 16 * 1024 * 1024): Promise<Buffer> {
    const res = await this.blobStream(digest);
    const body = await readLimited(res, Number(res.headers['content-length'] ?? '0'), maxBytes, `blob ${digest}`);
    const got = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (got !== digest) throw new RegistryError(`config ${digest} from ${this.where} digest mismatch: content hashes to ${got}`);
    return body;
  }

  /**
   * A layer blob's response body as a stream (not verified here: the caller hashes while it
   * streams), over node:http rather than fetch (see http-stream.ts). `signal` stops this one
   * download besides the client's own signal. Same authentication, retries and errors as
   * `request`.
   */
  async blobStream(digest: string, extraSignal?: AbortSignal): Promise<IncomingMessage> {
    const signal = this.signalWith(extraSignal);
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      let res;
      try {
        res = await streamGet(`${this.base}/blobs/${digest}`, {
          headers: this.authorization ? { authorization: this.authorization } : {},
          signal, headerTimeoutMs: HEADER_TIMEOUT_MS, timeoutError: () => this.headerTimeout(), checkHop: (next) => this.checkHop(next),
        });
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? err;
        if (err instanceof RegistryError) throw err;
        if (attempt < RETRIES) { await sleep(500 * attempt, signal); continue; }
        throw this.networkError(err as Error);
      }
      const status = res.statusCode ?? 0;
      if (status >= 200 && status < 300) return res;
      if (status === 401 && !reauthenticated) {
        res.destroy();
        await this.authenticate(parseChallenge(headerValue(res.headers['www-authenticate'])));
        reauthenticated = true;
        attempt = 0;
        continue;
      }
      const text = await readText(res);
      if (status === 401) throw this.unauthorized();
      if (status === 404) throw new RegistryError(`blob unknown: layer ${digest} is missing from ${this.where}`, 404);
      if (status >= 500 && attempt < RETRIES) { await sleep(500 * attempt, signal); continue; }
      throw this.statusError(status, text, `blob ${digest}`);
    }
  }

  private async request(path: string, h: { accept?: string }): Promise<Response> {
    const signal = this.opts.signal;
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = {};
      if (h.accept) headers.accept = h.accept;
      if (this.authorization) headers.authorization = this.authorization;
      let res: Response;
      try {
        res = await this.fetchWithHeaderTimeout(this.base + path, headers, signal);
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? err;
        if (err instanceof RegistryError) throw err;
        if (attempt < RETRIES) { await sleep(500 * attempt, signal); continue; }
        throw this.networkError(err as Error);
      }
      if (res.status !== 401 || reauthenticated) {
        if (res.status === 401) {
          await res.body?.cancel();
          throw this.unauthorized();
        }
        return res;
      }
      const challenge = parseChallenge(res.headers.get('www-authenticate'));
      await res.body?.cancel();
      await this.authenticate(challenge);
      reauthenticated = true;
      attempt = 0;
    }
  }

  /**
   * fetch with a deadline on the response headers only: a layer body may legitimately take
   * minutes, but a registry that does not answer at all must not hang the build.
   */
  private async fetchWithHeaderTimeout(url: string, headers: Record<string, string>, outer: AbortSignal | undefined): Promise<Response> {
    const ctl = new AbortController();
    if (outer?.aborted) throw outer.reason;
    const onAbort = () => ctl.abort(outer!.reason);
    outer?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => ctl.abort(this.headerTimeout()), HEADER_TIMEOUT_MS);
    try {
      // The listener stays while the body streams: aborting the job must also stop the body.
      return await this.fetchFollowing(url, headers, ctl.signal);
    } catch (err) {
      outer?.removeEventListener('abort', onAbort);
      if (ctl.signal.reason instanceof RegistryError) throw ctl.signal.reason;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * fetch, following redirects by hand (as fetch's own `follow` does: at most 20, Authorization
   * dropped when the origin changes), so that each hop is checked before it is taken (checkHop).
   */
  private async fetchFollowing(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    let current = new URL(url);
    let sent = headers;
    for (let hops = 0; ; hops++) {
      const res = await fetch(current, { headers: sent, signal, redirect: 'manual' });
      const location = res.headers.get('location');
      if (!REDIRECTS.has(res.status) || !location) return res;
      await res.body?.cancel();
      if (hops >= MAX_REDIRECTS) throw new RegistryError(`${this.ref.registry} redirected more than ${MAX_REDIRECTS} times`);
      const next = new URL(location, current);
      await this.checkHop(next);
      sent = headersForHop(sent, current, next);
      current = next;
    }
  }

  /** A redirect or a token realm the registry gives is followed only where hopRefusal allows. */
  private async checkHop(next: URL): Promise<void> {
    if (!this.opts.hopRefusal && this.opts.trusted) return;
    const why = await (this.opts.hopRefusal ?? ((u: URL) => hopRefusal(this.ref.registry, u)))(next);
    if (why) throw new RegistryError(why, 403);
  }

  private headerTimeout(): RegistryError {
    return new RegistryError(`registry ${this.ref.registry} did not answer within ${HEADER_TIMEOUT_MS / 1000} s`, undefined, true);
  }

  private signalWith(extra?: AbortSignal): AbortSignal | undefined {
    const own = this.opts.signal;
    return own && extra ? AbortSignal.any([own, extra]) : own ?? extra;
  }

  private async authenticate(ch: AuthChallenge | null): Promise<void> {
    const creds = this.opts.auth;
    if (!ch) throw new RegistryError(`unauthorized: ${this.ref.registry} refused the request without saying how to authenticate`, 401);
    if (ch.scheme === 'basic') {
      if (!creds) throw this.unauthorized();
      this.authorization = basicAuth(creds);
      return;
    }
    if (ch.scheme !== 'bearer' || !ch.params.realm) {
      throw new RegistryError(`unauthorized: ${this.ref.registry} asks for unsupported authentication "${ch.scheme}"`, 401);
    }
    const url = new URL(ch.params.realm);
    await this.checkHop(url);
    if (ch.params.service) url.searchParams.set('service', ch.params.service);
    url.searchParams.set('scope', ch.params.scope || `repository:${this.ref.repository}:pull`);
    const headers: Record<string, string> = creds ? { authorization: basicAuth(creds) } : {};
    let res: Response;
    try {
      res = await this.fetchFollowing(url.href, headers, AbortSignal.any([this.opts.signal ?? new AbortController().signal, AbortSignal.timeout(HEADER_TIMEOUT_MS)]));
    } catch (err) {
      if (this.opts.signal?.aborted) throw this.opts.signal.reason ?? err;
      if (err instanceof RegistryError) throw err;
      throw new RegistryError(`cannot reach the token service ${url.origin} of ${this.ref.registry}: ${causeOf(err as Error)}`, undefined, true);
    }
    const text = await res.text();
    if (res.status === 401 || res.status === 403) {
      throw new RegistryError(creds
        ? `unauthorized: wrong credentials for registry ${this.ref.registry} (token service refused user "${creds.username}")`
        : `unauthorized: registry ${this.ref.registry} requires credentials to pull ${this.ref.repository}`, 401);
    }
    if (!res.ok) throw new RegistryError(`token service ${url.origin} of ${this.ref.registry} answered ${res.status}: ${text.slice(0, 200)}`, res.status, res.status >= 500);
    let token: string | undefined;
    try {
      const doc = JSON.parse(text) as { token?: string; access_token?: string };
      token = doc.token || doc.access_token;
    } catch { /* handled below */ }
    if (!token) throw new RegistryError(`token service ${url.origin} of ${this.ref.registry} returned no token`);
    this.authorization = `Bearer ${token}`;
  }

  private unauthorized(): RegistryError {
    const creds = this.opts.auth;
    return new RegistryError(creds
      ? `unauthorized: wrong credentials for registry ${this.ref.registry} (user "${creds.username}" cannot pull ${this.ref.repository})`
      : `unauthorized: registry ${this.ref.registry} requires credentials to pull ${this.ref.repository}`, 401);
  }

  private async manifestError(res: Response, reference: string): Promise<RegistryError> {
    const text = await res.text().catch(() => {
      /* the error answer's body was cut off: the status alone makes the error */
      return '';
    });
    if (res.status === 404) {
      const { code } = distributionErrorCode(text);
      if (code === 'NAME_UNKNOWN') return new RegistryError(`name unknown: repository ${this.where} not found`, 404);
      const what = reference.startsWith('sha256:') ? `digest ${reference}` : `tag '${reference}'`;
      return new RegistryError(`manifest unknown: ${what} not found in ${this.where}`, 404);
    }
    return this.statusError(res.status, text, `manifest ${reference}`);
  }

  private statusError(status: number, text: string, what: string): RegistryError {
    const { code, message } = distributionErrorCode(text);
    const detail = message || text.slice(0, 200) || `HTTP ${status}`;
    if (status === 403) return new RegistryError(`denied: ${this.where} refused ${what}: ${detail}`, 403);
    if (status === 429) return new RegistryError(`toomanyrequests: ${this.ref.registry} is rate limiting pulls; try again later`, 429, true);
    return new RegistryError(`${code ? `${code.toLowerCase()}: ` : ''}${this.where} answered ${status} for ${what}: ${detail}`, status, status >= 500);
  }

  private networkError(err: Error): RegistryError {
    const cause = causeOf(err);
    const hint = !this.opts.insecure && /wrong version number|EPROTO|packet length too long/i.test(cause)
      ? ' (it looks like a plain-HTTP registry: set insecure)'
      : '';
    return new RegistryError(`cannot reach registry ${this.ref.registry}: ${cause}${hint}`, undefined, true);
  }
}

function headerValue(h: string | string[] | undefined): string | null {
  return (Array.isArray(h) ? h[0] : h) ?? null;
}

function basicAuth(c: RegistryCredentials): string {
  return `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
}

function causeOf(err: Error): string {
  // fetch wraps the socket or TLS error as its cause; node:http rejects with it directly.
  const c = (err.cause ?? err) as Error & { code?: string; reason?: string };
  // OpenSSL messages carry a file and line; its short reason reads better.
  const message = c.reason ?? c.message.split('\n')[0];
  return c.code && !message.includes(c.code) ? `${c.code} ${message}` : message;
}

/** A whole (small) response body, refused when its declared or actual length passes `max`. */
async function readLimited(body: AsyncIterable<Uint8Array> | null, declaredLength: number, max: number, what: string): Promise<Buffer> {
  if (declaredLength > max) throw new RegistryError(`${what} is too large (${declaredLength} bytes)`);
  const chunks: Uint8Array[] = [];
  for await (const chunk of body ?? []) chunks.push(chunk);
  const buf = Buffer.concat(chunks);
  if (buf.length > max) throw new RegistryError(`${what} is too large (${buf.length} bytes)`);
  return buf;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal!.reason); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
