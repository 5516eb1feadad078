/**
 * A header a message head cannot carry: a name that is not a token, or a value with a control
 * character (CR, LF and NUL end the header or split the message) or a character past U+00FF.
 */
export class InvalidHeaderError extends Error {
  readonly code = 'ERR_INVALID_CHAR';
  /** `header`: the header's name, or `request target`, `request method`, `status text`, `request head`. */
  constructor(readonly header: string) {
    const what = /^(request|status) /.test(header) ? `the ${header}` : `the header ${header}`;
    super(`${what} holds a character a message head cannot carry (a header name must be a token; a value may hold only tab, space, visible ASCII and Latin-1 characters)`);
    this.name = 'InvalidHeaderError';
  }
}

/**
 * What a field value or reason phrase may not hold (RFC 9110 5.5: HTAB, SP, VCHAR, obs-text).
 * Past U+00FF counts too: heads are written as latin1, which keeps a character's low byte, so
 * U+010D U+010A went out as CR LF and split the request on a connection tenants shared.
 */
const UNSAFE = /[^\t\x20-\x7e\x80-\xff]/;
/** What a request target may not hold: whitespace would end it, a control character or a character past U+00FF split the line. */
const UNSAFE_TARGET = /[^\x21-\x7e\x80-\xff]/;
/** A character a latin1 write would not send as itself. */
const NOT_LATIN1 = /[^\x00-\xff]/;

/** tchar of RFC 9110 5.6.2, as a 128-entry table. */
const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;

/**
 * The most trailer bytes (CRLFs not counted) a chunked message may end with, a request's or a
 * response's: each is kept until the message ends, so without a limit a peer that never ends
 * them fills the heap.
 */
export const MAX_TRAILER_BYTES = 16 * 1024;

/** Whether text[0, end) is a non-empty token (a method, a header name). */
export function isToken(text: string, end = text.length): boolean {
  if (end <= 0) return false;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || TOKEN[c] === 0) return false;
  }
  return true;
}

/**
 * Whether a name a Connection header lists may be dropped as hop-by-hop (RFC 9110 7.6.1). The
 * message's framing and Host never are: a proxy that dropped the Content-Length a client listed
 * in `Connection: content-length` still sent the body it framed, and the upstream read that body
 * as a second request on a pooled connection, which the next client's request then completed
 * (request smuggling across clients, and in the egress proxy across teams).
 */
export function droppableWhenListed(lowerName: string): boolean {
  return lowerName !== 'content-length' && lowerName !== 'transfer-encoding' && lowerName !== 'host';
}

/** Whether a header value or a status text holds a character it may not (UNSAFE), which could split a message. */
export const splitsMessage = (text: string): boolean => UNSAFE.test(text);

/** Whether a head holds a character a latin1 write would change (upstream-pool.ts refuses to send it). */
export const changedByLatin1 = (text: string): boolean => NOT_LATIN1.test(text);

/** Whether a header may be written: a token name (RFC 9110 5.1) and a value without UNSAFE characters. */
const safeHeader = (name: string, value: string): boolean => isToken(name) && !UNSAFE.test(value);

/** Throws InvalidHeaderError for a header that could split a message (requests and replies alike). */
export function assertSafeHeader(name: string, value: string): void {
  if (!safeHeader(name, value)) throw new InvalidHeaderError(isToken(name) ? name : JSON.stringify(name));
}

/** The end of a chunked body: the last chunk, the trailers (one that could split the message is dropped), the blank line. */
export function chunkedTail(trailers: readonly string[] | undefined): string {
  let tail = '0\r\n';
  if (trailers) {
    for (let i = 0; i < trailers.length; i += 2) {
      if (safeHeader(trailers[i], trailers[i + 1])) tail += `${trailers[i]}: ${trailers[i + 1]}\r\n`;
    }
  }
  return `${tail}\r\n`;
}

/**
 * A whole request head as one latin1 string (header strings from node's parser are latin1):
 * the request line, the headers of the flat [name, value, ...] list in order, the blank line.
 * Headers are checked, since some come from elsewhere than the client's parsed request (an
 * egress inject's secret, a vault value): one that could split the request (assertSafeHeader)
 * throws InvalidHeaderError rather than be sent.
 */
export function requestHead(method: string, target: string, headers: readonly string[]): string {
  if (!isToken(method)) throw new InvalidHeaderError('request method');
  if (UNSAFE_TARGET.test(target)) throw new InvalidHeaderError('request target');
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i];
    const value = headers[i + 1];
    assertSafeHeader(name, value);
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

/** Whether a flat header list has a Content-Length (else a body is streamed, and shown at once). */
export function hasContentLength(headers: readonly string[]): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i].length === 14 && headers[i].toLowerCase() === 'content-length') return true;
  }
  return false;
}
