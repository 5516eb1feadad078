import { droppableWhenListed } from '@svc/http1';

/**
 * One pass over a client request's raw headers: picks out what the proxy routes and gates on,
 * and builds the header list it forwards (hop-by-hop headers, traffic tokens and client-supplied
 * X-Forwarded-* removed). Names are only lower-cased when their length could match one we
 * care about, which keeps this allocation-light on the hot path.
 */
export interface ScannedRequest {
  host: string | undefined;
  sandboxIdHeader: string | undefined;
  sandboxPortHeader: string | undefined;
  /** Every traffic-token header value the client sent (usually none or one). */
  trafficTokens: string[] | undefined;
  /** X-Access-Token: envd's access token (forwarded: envd checks it too). */
  accessToken: string | undefined;
  forwardedFor: string | undefined;
  upgrade: string | undefined;
  /** True when the request carries a body (Content-Length > 0 or Transfer-Encoding). */
  hasBody: boolean;
  /** The body comes with Transfer-Encoding (so it is re-chunked towards the backend). */
  chunkedBody: boolean;
  /** Headers to forward, flat [name, value, name, value, ...] as http.request accepts them. */
  forward: string[];
}

export function scanRequestHeaders(raw: string[]): ScannedRequest {
  const s: ScannedRequest = {
    host: undefined, sandboxIdHeader: undefined, sandboxPortHeader: undefined, trafficTokens: undefined, accessToken: undefined,
    forwardedFor: undefined, upgrade: undefined, hasBody: false, chunkedBody: false, forward: [],
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
      case 15:
        if (name.toLowerCase() === 'x-forwarded-for') {
          s.forwardedFor = s.forwardedFor === undefined ? value : `${s.forwardedFor}, ${value}`;
          continue;
        }
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
  if (connection !== undefined) dropConnectionListed(out, connection);
  return s;
}

/** Headers named in Connection are hop-by-hop too (RFC 9110 7.6.1). */
function dropConnectionListed(out: string[], connection: string) {
  const only = connection.length <= 10 ? connection.toLowerCase() : '';
  if (only === 'keep-alive' || only === 'close' || only === 'upgrade') return; // the usual case, no allocation
  const names = connection.toLowerCase().split(',').map((t) => t.trim())
    .filter((t) => t && t !== 'keep-alive' && t !== 'close' && t !== 'upgrade' && droppableWhenListed(t));
  if (names.length === 0) return;
  for (let i = out.length - 2; i >= 0; i -= 2) {
    if (names.includes(out[i].toLowerCase())) out.splice(i, 2);
  }
}

/** Appends X-Forwarded-For/-Proto/-Host for the backend. */
export function addForwardedHeaders(s: ScannedRequest, remoteAddress: string | undefined, proto: 'http' | 'https'): void {
  const remote = remoteAddress ?? '';
  s.forward.push(
    'X-Forwarded-For', s.forwardedFor === undefined ? remote : `${s.forwardedFor}, ${remote}`,
    'X-Forwarded-Proto', proto,
  );
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
  if (connection !== undefined) dropConnectionListed(out, connection);
  return out;
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
