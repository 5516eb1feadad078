/** A header a request head cannot carry: a CR, LF or NUL would end the header or split the request. */
export class InvalidHeaderError extends Error {
  readonly code = 'ERR_INVALID_CHAR';
  constructor(readonly header: string) {
    super(`the header ${header} holds a character a request cannot carry (CR, LF or NUL)`);
    this.name = 'InvalidHeaderError';
  }
}

const UNSAFE = /[\r\n\0]/;

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

/** Whether a header's name, value or a status text holds CR, LF or NUL, which would split a message. */
export const splitsMessage = (text: string): boolean => UNSAFE.test(text);

/** Throws InvalidHeaderError for a header that would split a message (requests and replies alike). */
export function assertSafeHeader(name: string, value: string): void {
  if (UNSAFE.test(name) || UNSAFE.test(value)) throw new InvalidHeaderError(UNSAFE.test(name) ? JSON.stringify(name) : name);
}

/** The end of a chunked body: the last chunk, the trailers (one that would split the message is dropped), the blank line. */
export function chunkedTail(trailers: readonly string[] | undefined): string {
  let tail = '0\r\n';
  if (trailers) {
    for (let i = 0; i < trailers.length; i += 2) {
      if (!UNSAFE.test(trailers[i]) && !UNSAFE.test(trailers[i + 1])) tail += `${trailers[i]}: ${trailers[i + 1]}\r\n`;
    }
  }
  return `${tail}\r\n`;
}

/**
 * A whole request head as one latin1 string (header strings from node's parser are latin1):
 * the request line, the headers of the flat [name, value, ...] list in order, the blank line.
 * Headers are checked, since some come from elsewhere than the client's parsed request (an
 * egress inject's secret): one holding CR, LF or NUL throws InvalidHeaderError rather than let
 * it split the request.
 */
export function requestHead(method: string, target: string, headers: readonly string[]): string {
  if (UNSAFE.test(target)) throw new InvalidHeaderError('request target');
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
