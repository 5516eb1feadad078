import { droppableWhenListed } from '@svc/http1';

/**
 * One pass over a client request's raw headers: picks out what the proxy routes and gates on,
 * and builds the header list it forwards (hop-by-hop headers, traffic tokens and client-supplied
 * X-Forwarded-For, -Host and -Proto removed: addForwardedHeaders sets the proxy's own). Names are
 * only lower-cased when their length could match one we care about, which keeps this
 * allocation-light on the hot path.
 */
export interface ScannedRequest {
  host: string | undefined;
  sandboxIdHeader: string | undefined;
  sandboxPortHeader: string | undefined;
  /** Every traffic-token header value the client sent (usually none or one). */
  trafficTokens: string[] | undefined;
  /** X-Access-Token: envd's access token (forwarded: envd checks it too). */
  accessToken: string | undefined;
  upgrade: string | undefined;
  /** True when the request carries a body (Content-Length > 0 or Transfer-Encoding). */
  hasBody: boolean;
  /** The body comes with Transfer-Encoding (so it is re-chunked towards the backend). */
  chunkedBody: boolean;
  /** Headers to forward, flat [name, value, name, value, ...] as http.request accepts them. */
  forward: string[];
  /** Why the request cannot be forwarded as it is (a 400), found while scanning. */
  refusal: string | undefined;
}

/**
 * The most names a Connection header may make hop-by-hop; real clients list one or two. Each
 * is checked against every header, so without a limit a 16 KiB head made one request cost
 * milliseconds of the proxy's CPU.
 */
const MAX_CONNECTION_NAMES = 64;

export function scanRequestHeaders(raw: string[]): ScannedRequest {
  const s: ScannedRequest = {
    host: undefined, sandboxIdHeader: undefined, sandboxPortHeader: undefined, trafficTokens: undefined, accessToken: undefined,
    upgrade: undefined, hasBody: false, chunkedBody: false, forward: [], refusal: undefined,
  };
  const out = s.forward;
  let connection: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const value = raw[i + 1];
    switch (name.length) {
      case 2: // te: only "trailers" means anything end to end
        if (name.toLowerCase() === 'te' && value.trim().toLowerCase() !== 'trailers') continue;
        break;
      case 4:
        if (s.host === undefined && name.toLowerCase() === 'host') s.host = value;
        break;
      case 6: // the proxy answered "100 Continue" itself already
        if (name.toLowerCase() === 'expect') continue;
        break;
      case 7: {
        const l = name.toLowerCase();
        if (l === 'upgrade') { s.upgrade = value; continue; }
        if (l === 'trailer') continue;
        break;
      }
      case 10: {
        const l = name.toLowerCase();
        if (l === 'connection') { connection = connection === undefined ? value : `${connection}, ${value}`; continue; }
        if (l === 'keep-alive') continue;
        break;
      }
      case 14: {
        const l = name.toLowerCase();
        if (l === 'e2b-sandbox-id') s.sandboxIdHeader = value;
        else if (l === 'content-length' && value !== '0') s.hasBody = true;
        else if (l === 'x-access-token' && s.accessToken === undefined) s.accessToken = value;
        break;
      }
      case 15: // the client's own claim: see addForwardedHeaders
        if (name.toLowerCase() === 'x-forwarded-for') continue;
        break;
      case 16: {
        const l = name.toLowerCase();
        if (l === 'e2b-sandbox-port') s.sandboxPortHeader = value;
        else if (l === 'x-forwarded-host') continue;
        break;
      }
      case 17: {
        const l = name.toLowerCase();
        if (l === 'x-forwarded-proto') continue;
        if (l === 'transfer-encoding') { s.hasBody = true; s.chunkedBody = true; } // kept: the body is re-chunked
        break;
      }
      case 18:
        if (name.toLowerCase() === 'proxy-authenticate') continue;
        break;
      case 19:
        if (name.toLowerCase() === 'proxy-authorization') continue;
        break;
      case 24: {
        const l = name.toLowerCase();
        if (l === 'ext-traffic-access-token' || l === 'svc-traffic-access-token' || l === 'e2b-traffic-access-token') {
          (s.trafficTokens ??= []).push(value);
          continue;
        }
        break;
      }
    }
    out.push(name, value);
  }
  if (connection !== undefined) {
    const listed = connectionListed(connection);
    if (listed?.overflow) s.refusal = `the Connection header lists more than ${MAX_CONNECTION_NAMES} header names`;
    else if (listed) s.forward = withoutListed(out, listed.names);
  }
  return s;
}

/**
 * The names a Connection header makes hop-by-hop too (RFC 9110 7.6.1), lower-cased, the first
 * MAX_CONNECTION_NAMES of them; `overflow` when it lists more. Undefined when it lists none
 * beyond the usual keep-alive, close and upgrade.
 */
function connectionListed(connection: string): { names: Set<string>; overflow: boolean } | undefined {
  const only = connection.length <= 10 ? connection.toLowerCase() : '';
  if (only === 'keep-alive' || only === 'close' || only === 'upgrade') return undefined; // the usual case, no allocation
  const names = new Set<string>();
  for (const item of connection.toLowerCase().split(',')) {
    const t = item.trim();
    if (!t || t === 'keep-alive' || t === 'close' || t === 'upgrade' || !droppableWhenListed(t) || names.has(t)) continue;
    if (names.size === MAX_CONNECTION_NAMES) return { names, overflow: true };
    names.add(t);
  }
  return names.size === 0 ? undefined : { names, overflow: false };
}

/** The flat header list without the names listed (one pass: splicing each out would be quadratic). */
function withoutListed(headers: string[], names: Set<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if (!names.has(headers[i].toLowerCase())) out.push(headers[i], headers[i + 1]);
  }
  return out;
}

/**
 * Appends X-Forwarded-For/-Proto/-Host for the backend, in place of any the client sent. The
 * proxy is the sandboxes' edge and trusts no proxy in front of it (it has no trusted-proxies
 * setting, unlike the API's `api.trusted_proxies`), so X-Forwarded-For is the client's address
 * alone: kept and appended to, a client's own value read as its address to a sandbox's server
 * that takes the first entry (docs/data-plane.md, "Naming the sandbox").
 */
export function addForwardedHeaders(s: ScannedRequest, remoteAddress: string | undefined, proto: 'http' | 'https'): void {
  s.forward.push('X-Forwarded-For', remoteAddress ?? '', 'X-Forwarded-Proto', proto);
  if (s.host !== undefined) s.forward.push('X-Forwarded-Host', s.host);
}

/** Response headers that describe the proxy-to-backend hop, not the message. */
export function filterResponseHeaders(raw: string[]): string[] {
  const out: string[] = [];
  let connection: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    const len = name.length;
    if (len === 10 || len === 7 || len === 2 || len === 18) {
      const l = name.toLowerCase();
      if (l === 'connection') { connection = raw[i + 1]; continue; }
      if (l === 'keep-alive' || l === 'upgrade' || l === 'te' || l === 'proxy-authenticate') continue;
    }
    out.push(name, raw[i + 1]);
  }
  // A sandbox's answer is relayed even when it lists too many: only its own headers are at stake.
  const listed = connection === undefined ? undefined : connectionListed(connection);
  return listed === undefined ? out : withoutListed(out, listed.names);
}

/**
 * Adds the E2b-Sandbox-* headers to a response's Vary, after what the sandbox put there (a
 * `Vary: *` says it all already): they chose the sandbox, and a cache in front that keys on the
 * URL alone would serve one sandbox's answer for another's.
 */
export function varyOnSandboxHeaders(headers: string[]): void {
  const names = 'E2b-Sandbox-Id, E2b-Sandbox-Port';
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length !== 4 || headers[i].toLowerCase() !== 'vary') continue;
    const v = headers[i + 1].trim();
    if (v === '*') return;
    headers[i + 1] = v === '' ? names : `${v}, ${names}`;
    return;
  }
  headers.push('Vary', names);
}

/** The Host a sandbox sees: its network's maskRequestHost, `${PORT}` made the port, when it sets one. */
export function maskedHost(route: { maskRequestHost?: string }, port: number): string | undefined {
  return route.maskRequestHost?.replaceAll('${PORT}', String(port));
}

/**
 * The request line and headers as one latin1 string (header strings from node are latin1),
 * without the blank line that ends them. `mask` replaces the client's Host (maskedHost).
 */
export function requestLines(method: string, url: string, s: ScannedRequest, fallbackHost: string, mask?: string): string {
  let head = `${method} ${url} HTTP/1.1\r\n`;
  if (mask !== undefined) head += `Host: ${mask}\r\n`;
  else if (s.host === undefined) head += `Host: ${fallbackHost}\r\n`;
  const h = s.forward;
  for (let i = 0; i < h.length; i += 2) {
    if (mask !== undefined && h[i].length === 4 && h[i].toLowerCase() === 'host') continue;
    head += `${h[i]}: ${h[i + 1]}\r\n`;
  }
  return head;
}

/** requestLines and the blank line: a whole request head. */
export function requestHead(method: string, url: string, s: ScannedRequest, fallbackHost: string, mask?: string): string {
  return `${requestLines(method, url, s, fallbackHost, mask)}\r\n`;
}
