import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { MANIFEST_ACCEPT, MediaTypes } from '../image/oci-types.ts';
import { parseChallenge, type AuthChallenge } from './challenge.ts';
import { hopRefusal } from './hop-guard.ts';
import { readText, responseUrl, streamGet, type StreamGetOptions } from './http-stream.ts';
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
/** An image config is read into memory whole; real ones are a few KiB. */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;
/** A token service's answer: a token and its lifetime, a few KiB at most in practice. */
const MAX_TOKEN_BYTES = 1024 * 1024;
const RETRIES = 3;
/** fetch's own limit when it follows redirects, kept when the client moved to node:http. */
const MAX_REDIRECTS = 20;
const HEADER_TIMEOUT_MS = 60_000;

/**
 * What a manifest or blob path may hold. The digests come from the registry's own documents (an
 * index, a manifest): put unchecked into the path, `sha256:x/../../other` sent the request to
 * another path of the registry's host, an operator's mirror among them (found by a helper
 * reading the template center as an attacker, 2026-11-30).
 */
const DIGEST = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;
const TAG = /^[\w][\w.-]{0,127}$/;

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
    if (!DIGEST.test(reference) && !TAG.test(reference)) throw new RegistryError(`${this.where}: ${JSON.stringify(reference.slice(0, 200))} is neither a tag nor a digest`);
    const res = await this.request(`/manifests/${reference}`, { accept: MANIFEST_ACCEPT });
    if (!succeeded(res)) throw await this.manifestError(res, reference);
    const body = await readLimited(res, MAX_MANIFEST_BYTES, `manifest ${reference}`);
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    if (reference.startsWith('sha256:') && reference !== digest) {
      throw new RegistryError(`manifest ${reference} from ${this.where} digest mismatch: content hashes to ${digest}`);
    }
    let doc: unknown;
    try { doc = JSON.parse(body.toString('utf8')); } catch { throw new RegistryError(`manifest ${reference} from ${this.where} is not valid JSON`); }
    const mediaType = (doc as { mediaType?: string }).mediaType || res.headers['content-type']?.split(';')[0] || undefined;
    if (mediaType === MediaTypes.dockerSchema1 || mediaType === MediaTypes.dockerSchema1Signed || (doc as { schemaVersion?: number }).schemaVersion === 1) {
      throw new RegistryError(`${this.where}:${reference} uses the Docker schema 1 manifest format, which is not supported; push it again with a current client`);
    }
    return { digest, mediaType, body, doc };
  }

  /**
   * Small blob (image config) read whole and verified: held to `size`, its descriptor's, and
   * to MAX_CONFIG_BYTES, since it is read into memory.
   */
  async blobBytes(digest: string, size: number): Promise<Buffer> {
    if (size > MAX_CONFIG_BYTES) throw new RegistryError(`config ${digest} of ${this.where} is too large (${size} bytes; a config may have ${MAX_CONFIG_BYTES})`);
    const res = await this.blobStream(digest);
    const body = await readLimited(res, size, `config ${digest}`);
    if (body.length !== size) throw new RegistryError(`config ${digest} from ${this.where} digest mismatch: got ${body.length} bytes, manifest says ${size}`);
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
    if (!DIGEST.test(digest)) throw new RegistryError(`${this.where}: ${JSON.stringify(digest.slice(0, 200))} is not a digest`);
    const signal = this.signalWith(extraSignal);
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      let res;
      try {
        res = await streamGet(`${this.base}/blobs/${digest}`, {
          headers: this.authorization ? { authorization: this.authorization } : {},
          ...this.getOptions(signal),
        });
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? err;
        if (err instanceof RegistryError) throw err;
        if (attempt < RETRIES) { await sleep(500 * attempt, signal); continue; }
        throw this.networkError(err as Error);
      }
      const status = res.statusCode ?? 0;
      if (succeeded(res)) return res;
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
      throw this.statusError(status, text, `blob ${digest}`, res);
    }
  }

  /** A GET of a registry path (manifests), authenticated and retried as blobStream is. */
  private async request(path: string, h: { accept?: string }): Promise<IncomingMessage> {
    const signal = this.opts.signal;
    let reauthenticated = false;
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = {};
      if (h.accept) headers.accept = h.accept;
      if (this.authorization) headers.authorization = this.authorization;
      let res: IncomingMessage;
      try {
        res = await streamGet(this.base + path, { headers, ...this.getOptions(signal) });
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? err;
        if (err instanceof RegistryError) throw err;
        if (attempt < RETRIES) { await sleep(500 * attempt, signal); continue; }
        throw this.networkError(err as Error);
      }
      if (res.statusCode !== 401 || reauthenticated) {
        if (res.statusCode === 401) {
          res.destroy();
          throw this.unauthorized();
        }
        return res;
      }
      const challenge = parseChallenge(headerValue(res.headers['www-authenticate']));
      res.destroy();
      await this.authenticate(challenge);
      reauthenticated = true;
      attempt = 0;
    }
  }

  /**
   * How every request of this client is made (http-stream.ts): a deadline on the response headers
   * only (a layer body may legitimately take minutes, but a registry that does not answer at all
   * must not hang the build), each redirect checked before it is taken (checkHop), and, for a
   * registry the operator did not name, each connection made to an address checked when it was
   * resolved (guardedLookup), so a name cannot answer the check and the connection differently.
   */
  private getOptions(signal: AbortSignal | undefined): Omit<StreamGetOptions, 'headers'> {
    return {
      signal, headerTimeoutMs: HEADER_TIMEOUT_MS, timeoutError: () => this.headerTimeout(),
      maxRedirects: MAX_REDIRECTS, tooManyRedirects: () => new RegistryError(`${this.ref.registry} redirected more than ${MAX_REDIRECTS} times`),
      checkHop: (next) => this.checkHop(next), guarded: !this.opts.trusted,
    };
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
    let res: IncomingMessage;
    let text: string;
    try {
      // The whole answer, body included, within the deadline: a token is small.
      res = await streamGet(url.href, { headers, ...this.getOptions(this.signalWith(AbortSignal.timeout(HEADER_TIMEOUT_MS))) });
      text = (await readLimited(res, MAX_TOKEN_BYTES, `the token from ${url.origin}`)).toString('utf8');
    } catch (err) {
      if (this.opts.signal?.aborted) throw this.opts.signal.reason ?? err;
      if (err instanceof RegistryError) throw err;
      throw new RegistryError(`cannot reach the token service ${url.origin} of ${this.ref.registry}: ${causeOf(err as Error)}`, undefined, true);
    }
    const status = res.statusCode ?? 0;
    if (status === 401 || status === 403) {
      throw new RegistryError(creds
        ? `unauthorized: wrong credentials for registry ${this.ref.registry} (token service refused user "${creds.username}")`
        : `unauthorized: registry ${this.ref.registry} requires credentials to pull ${this.ref.repository}`, 401);
    }
    if (!succeeded(res)) {
      const said = this.answeredByRegistry(res) ? `: ${text.slice(0, 200)}` : '';
      throw new RegistryError(`token service ${url.origin} of ${this.ref.registry} answered ${status}${said}`, status, status >= 500);
    }
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

  private async manifestError(res: IncomingMessage, reference: string): Promise<RegistryError> {
    // readText keeps what it could read: a body cut off leaves the status to make the error.
    const text = await readText(res);
    const status = res.statusCode ?? 0;
    if (status === 404) {
      const { code } = distributionErrorCode(text);
      if (code === 'NAME_UNKNOWN') return new RegistryError(`name unknown: repository ${this.where} not found`, 404);
      const what = reference.startsWith('sha256:') ? `digest ${reference}` : `tag '${reference}'`;
      return new RegistryError(`manifest unknown: ${what} not found in ${this.where}`, 404);
    }
    return this.statusError(status, text, `manifest ${reference}`, res);
  }

  /**
   * Whether a response came from the registry's own host. Another host's words are not repeated
   * in an error: a registry that redirects the pull to a service the template center reaches
   * and the team does not (an internal API, a cloud's metadata) would have its answer read back
   * to the team in the build's error (found by a helper reading the template center as an
   * attacker). The status is still told, and the origin, which the registry named itself.
   */
  private answeredByRegistry(res: IncomingMessage): boolean {
    const from = responseUrl(res);
    return !from || from.host === new URL(this.base).host;
  }

  private statusError(status: number, body: string, what: string, res: IncomingMessage): RegistryError {
    const own = this.answeredByRegistry(res);
    const text = own ? body : '';
    const { code, message } = distributionErrorCode(text);
    const detail = message || text.slice(0, 200) || `HTTP ${status}${own ? '' : ` from ${responseUrl(res)?.origin}`}`;
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

function succeeded(res: IncomingMessage): boolean {
  const status = res.statusCode ?? 0;
  return status >= 200 && status < 300;
}

function causeOf(err: Error): string {
  // node:http rejects with the socket or TLS error itself; an error that wraps one names it as its cause.
  const c = (err.cause ?? err) as Error & { code?: string; reason?: string };
  // OpenSSL messages carry a code, a function, a file and a line; its short reason reads better.
  const message = c.reason ?? /error:[0-9A-Fa-f]+:SSL routines:[^:]*:([^:]+)/.exec(c.message)?.[1] ?? c.message.split('\n')[0];
  return c.code && !message.includes(c.code) ? `${c.code} ${message}` : message;
}

/**
 * A whole (small) response body, refused when its declared length passes `max`, or its actual
 * length as soon as it does (the rest is not read: a registry sending without end fills nothing).
 */
async function readLimited(res: IncomingMessage, max: number, what: string): Promise<Buffer> {
  const declared = Number(res.headers['content-length'] ?? '0');
  if (declared > max) { res.destroy(); throw new RegistryError(`${what} is too large (${declared} bytes)`); }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) { res.destroy(); throw new RegistryError(`${what} is too large (more than ${max} bytes)`); }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal!.reason); };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
