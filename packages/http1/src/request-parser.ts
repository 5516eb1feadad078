/**
 * An incremental, strict HTTP/1.x request parser for the proxies' client side (docs/design.md
 * "One HTTP/1.1 path"). A proxy is where request smuggling happens, so anything two parsers
 * could read two ways is refused, never repaired: both Content-Length and Transfer-Encoding,
 * differing Content-Lengths, a coding other than chunked, obs-fold, a bare CR or LF, a space
 * before a header's colon, control characters, a missing or repeated Host on HTTP/1.1.
 * Bodies are handed on as slices of the received buffers; chunked bodies are decoded (the proxy
 * frames them again towards its upstream).
 */

import { isToken, MAX_TRAILER_BYTES } from './request-head.ts';

export interface RequestHead {
  method: string;
  /** The request target as sent (origin form, or absolute form from a proxy-minded client). */
  target: string;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: number;
  /** Flat [name, value, ...] in the order received, names as sent, values without surrounding whitespace. */
  headers: string[];
  /** The connection may carry another request after this one's answer. */
  keepAlive: boolean;
  /** How the body is framed: none, Content-Length bytes, or chunked. */
  body: 'none' | 'length' | 'chunked';
  contentLength: number;
  /** Connection: upgrade with an Upgrade header, or CONNECT: what follows the head is not HTTP. */
  upgrade: boolean;
  /** Expect: 100-continue, with a body to come. */
  expectContinue: boolean;
}

export interface RequestEvents {
  onRequest(head: RequestHead): void;
  onBody(chunk: Buffer): void;
  /** The body ended (at once for a request without one); trailers of a chunked body, flat. */
  onEnd(trailers: string[] | undefined): void;
}

/**
 * A request the proxy refuses to read: its status (400; 408 for a head too slow; 431 for one too
 * large) and why. Never a 5xx: docs/design.md "Errors" keeps those for the platform's own faults.
 */
export class RequestParseError extends Error {
  readonly code = 'HPE_INVALID_REQUEST';
  constructor(readonly status: 400 | 408 | 431, message: string) {
    super(message);
    this.name = 'RequestParseError';
  }
}

const enum S { Head, Fixed, ChunkSize, ChunkData, ChunkEnd, Trailers, Done, Upgraded }

/** node's default maxHeaderSize, which the proxies' node servers used before. */
const MAX_REQUEST_HEAD = 16 * 1024;
const MAX_LINE = 8 * 1024;
const CRLF = Buffer.from('\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');
const LFLF = Buffer.from('\n\n');

const bad = (message: string) => new RequestParseError(400, message);
/** Strips SP and HTAB only: String.prototype.trim would also strip an obs-text NBSP (0xA0), reading `chunked\xA0` as chunked. */
const trimOws = (s: string) => s.replace(/^[ \t]+|[ \t]+$/g, '');

export class RequestParser {
  private state = S.Head;
  private pending: Buffer | undefined;
  private remaining = 0;
  private trailers: string[] | undefined;
  private trailerBytes = 0;
  /** Some bytes of the next request arrived (a timer for its head may be due). */
  started = false;

  constructor(private readonly ev: RequestEvents, private readonly maxHead = MAX_REQUEST_HEAD) {}

  /** The current request is whole (head and body); bytes of the next wait for next(). */
  get done(): boolean { return this.state === S.Done; }
  /** Bytes received and not yet parsed (those of a pipelined request, while the last is answered). */
  get buffered(): number { return this.pending?.length ?? 0; }

  /**
   * Feeds received bytes. Throws RequestParseError on a request that must be refused. After an
   * upgrade's head it returns what followed the head (the new protocol's first bytes), and
   * parses nothing more.
   */
  execute(chunk: Buffer): Buffer | undefined {
    let buf = chunk;
    if (this.pending !== undefined) { buf = Buffer.concat([this.pending, chunk]); this.pending = undefined; }
    if (this.state === S.Done || this.state === S.Upgraded) { this.pending = buf; return undefined; }
    this.started = true;
    return this.run(buf);
  }

  /** Moves on to the next request, parsing whatever of it is buffered already. */
  next(): Buffer | undefined {
    if (this.state !== S.Done) return undefined;
    this.state = S.Head;
    this.trailers = undefined;
    this.trailerBytes = 0;
    const buf = this.pending;
    this.pending = undefined;
    this.started = buf !== undefined;
    return buf === undefined ? undefined : this.run(buf);
  }

  private run(buf: Buffer): Buffer | undefined {
    let pos = 0;
    const len = buf.length;
    while (pos < len) {
      switch (this.state) {
        case S.Head: {
          // Empty lines before a request line are ignored (RFC 9112 2.2): some clients send a
          // CRLF after a body.
          while (pos + 1 < len && buf[pos] === 13 && buf[pos + 1] === 10) pos += 2;
          if (pos >= len) return undefined;
          const end = buf.indexOf(CRLFCRLF, pos);
          if (end < 0) {
            if (buf.indexOf(LFLF, pos) >= 0) throw bad('header lines must end in CRLF');
            // +3: the head may end in the part of its blank line still to come.
            if (len - pos > this.maxHead + 3) throw new RequestParseError(431, 'request headers are too large');
            this.pending = pos === 0 ? buf : buf.subarray(pos);
            return undefined;
          }
          if (end - pos > this.maxHead) throw new RequestParseError(431, 'request headers are too large');
          const head = parseHead(buf.toString('latin1', pos, end));
          pos = end + 4;
          if (head.upgrade) {
            this.state = S.Upgraded;
            this.ev.onRequest(head);
            return pos < len ? buf.subarray(pos) : Buffer.alloc(0);
          }
          if (head.body === 'length') { this.remaining = head.contentLength; this.state = S.Fixed; }
          else if (head.body === 'chunked') this.state = S.ChunkSize;
          else this.state = S.Done;
          this.ev.onRequest(head);
          if (this.state === S.Done) { this.ev.onEnd(undefined); return this.park(buf, pos); }
          break;
        }
        case S.Fixed:
        case S.ChunkData: {
          const n = Math.min(this.remaining, len - pos);
          this.remaining -= n;
          const body = pos === 0 && n === len ? buf : buf.subarray(pos, pos + n);
          pos += n;
          const fixedDone = this.remaining === 0 && this.state === S.Fixed;
          if (this.remaining === 0) this.state = fixedDone ? S.Done : S.ChunkEnd;
          this.ev.onBody(body);
          if (fixedDone) { this.ev.onEnd(undefined); return this.park(buf, pos); }
          break;
        }
        case S.ChunkSize: {
          const end = buf.indexOf(CRLF, pos);
          if (end < 0) return this.keep(buf, pos, MAX_LINE);
          const size = parseChunkSize(buf, pos, end);
          pos = end + 2;
          if (size === 0) this.state = S.Trailers;
          else { this.remaining = size; this.state = S.ChunkData; }
          break;
        }
        case S.ChunkEnd:
          if (len - pos < 2) return this.keep(buf, pos, 2);
          if (buf[pos] !== 13 || buf[pos + 1] !== 10) throw bad('a chunk is not followed by CRLF');
          pos += 2;
          this.state = S.ChunkSize;
          break;
        case S.Trailers: {
          const end = buf.indexOf(CRLF, pos);
          if (end < 0) return this.keep(buf, pos, MAX_LINE);
          if (end === pos) {
            this.state = S.Done;
            this.ev.onEnd(this.trailers);
            return this.park(buf, end + 2);
          }
          this.trailerBytes += end - pos;
          if (this.trailerBytes > MAX_TRAILER_BYTES) throw new RequestParseError(431, 'request trailers are too large');
          const [name, value] = headerLine(buf.toString('latin1', pos, end));
          (this.trailers ??= []).push(name, value);
          pos = end + 2;
          break;
        }
        case S.Done:
        case S.Upgraded:
          return this.park(buf, pos);
      }
    }
    return undefined;
  }

  /** Keeps the rest of buf (a pipelined request's bytes) for next(). */
  private park(buf: Buffer, pos: number): undefined {
    if (pos < buf.length) this.pending = buf.subarray(pos);
    return undefined;
  }

  private keep(buf: Buffer, pos: number, limit: number): undefined {
    if (buf.length - pos > limit) throw bad('a chunk size or trailer line is too long');
    this.pending = pos === 0 ? buf : buf.subarray(pos);
    return undefined;
  }
}

/** Parses a head (without its blank line) into a RequestHead, or throws the refusal. */
export function parseHead(text: string): RequestHead {
  const lines = text.split('\r\n');
  const [method, target, minor] = requestLine(lines[0]);
  const headers: string[] = [];
  let contentLength = -1;
  let codings: string | undefined;
  let connection = '';
  let hosts = 0;
  let upgradeHeader = false;
  let expect: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const [name, value] = headerLine(lines[i]);
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === 'host') hosts++;
        break;
      case 6:
        if (name.toLowerCase() === 'expect') expect = value.toLowerCase();
        break;
      case 7:
        if (name.toLowerCase() === 'upgrade') upgradeHeader = true;
        break;
      case 10:
        if (name.toLowerCase() === 'connection') connection = connection ? `${connection},${value}` : value;
        break;
      case 14:
        if (name.toLowerCase() === 'content-length') {
          if (!/^\d{1,15}$/.test(value)) throw bad('the Content-Length is not a number');
          const n = Number(value);
          if (contentLength >= 0 && contentLength !== n) throw bad('the request has differing Content-Lengths');
          contentLength = n;
        }
        break;
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') codings = codings === undefined ? value : `${codings},${value}`;
        break;
    }
    headers.push(name, value);
  }
  // CONNECT names its authority in the request line, and clients often send no Host with it
  // (node's server accepted that too).
  if (minor === 1 && hosts === 0 && method !== 'CONNECT') throw bad('an HTTP/1.1 request must name its Host');
  if (hosts > 1) throw bad('the request has more than one Host');
  let body: RequestHead['body'] = contentLength > 0 ? 'length' : 'none';
  if (codings !== undefined) {
    if (contentLength >= 0) throw bad('the request has both Transfer-Encoding and Content-Length');
    if (minor === 0) throw bad('an HTTP/1.0 request cannot carry Transfer-Encoding');
    const list = codings.toLowerCase().split(',').map(trimOws);
    if (list[list.length - 1] !== 'chunked') throw bad('the request body is not chunked last, so its end is unknown');
    if (list.length > 1) throw bad('transfer codings other than chunked are not supported');
    body = 'chunked';
  }
  const tokens = connection.toLowerCase().split(',').map(trimOws);
  const keepAlive = minor === 1 ? !tokens.includes('close') : tokens.includes('keep-alive');
  const upgrade = method === 'CONNECT' || (upgradeHeader && tokens.includes('upgrade'));
  // An HTTP/1.0 client gets no 1xx (RFC 9110 10.1.1): its expectation is ignored.
  const expectContinue = body !== 'none' && minor === 1 && expect === '100-continue';
  return { method, target, minor, headers, keepAlive, body, contentLength: Math.max(contentLength, 0), upgrade, expectContinue };
}

function requestLine(line: string): [string, string, number] {
  const sp1 = line.indexOf(' ');
  const sp2 = line.indexOf(' ', sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || line.indexOf(' ', sp2 + 1) >= 0) throw bad('malformed request line');
  const method = line.slice(0, sp1);
  if (!isToken(method)) throw bad('malformed method');
  const target = line.slice(sp1 + 1, sp2);
  if (target.length === 0) throw bad('empty request target');
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    // Visible characters and obs-text: a control character, DEL or whitespace would split it.
    if (c <= 32 || c === 127) throw bad('the request target holds a control character');
  }
  const version = line.slice(sp2 + 1);
  if (version === 'HTTP/1.1') return [method, target, 1];
  if (version === 'HTTP/1.0') return [method, target, 0];
  // 400 as node's server and nginx answer it, not 505: a client's mistake (an HTTP/2 preface on
  // this port) is no server error, and must not count as one in the proxy's 5xx.
  if (/^HTTP\/\d\.\d$/.test(version)) throw bad(`${version} is not served on this port: use HTTP/1.1`);
  throw bad('malformed HTTP version');
}

/** One `name: value` line, checked: token name, colon right after it, no control character in the value. */
function headerLine(line: string): [string, string] {
  const colon = line.indexOf(':');
  if (colon <= 0) throw bad(line.length > 0 && (line.charCodeAt(0) === 32 || line.charCodeAt(0) === 9) ? 'obs-fold header lines are not accepted' : 'malformed header line');
  if (!isToken(line, colon)) throw bad('malformed header name');
  let start = colon + 1;
  let end = line.length;
  while (start < end && (line.charCodeAt(start) === 32 || line.charCodeAt(start) === 9)) start++;
  while (end > start && (line.charCodeAt(end - 1) === 32 || line.charCodeAt(end - 1) === 9)) end--;
  for (let i = start; i < end; i++) {
    const c = line.charCodeAt(i);
    // HTAB, visible characters and obs-text; a CR, LF, NUL or other control character is refused.
    if ((c < 32 && c !== 9) || c === 127) throw bad('a header value holds a control character');
  }
  return [line.slice(0, colon), line.slice(start, end)];
}

function parseChunkSize(buf: Buffer, from: number, to: number): number {
  let size = 0;
  let digits = 0;
  let i = from;
  for (; i < to; i++) {
    const c = buf[i];
    let v: number;
    if (c >= 48 && c <= 57) v = c - 48;
    else if (c >= 97 && c <= 102) v = c - 87;
    else if (c >= 65 && c <= 70) v = c - 55;
    else break;
    size = size * 16 + v;
    if (++digits > 12) throw bad('a chunk is too large');
  }
  if (digits === 0) throw bad('malformed chunk size');
  // After the size only chunk extensions (`;name=value`, optionally after whitespace) may follow.
  for (; i < to; i++) {
    const c = buf[i];
    if (c === 59) break;
    if (c !== 32 && c !== 9) throw bad('malformed chunk size');
  }
  for (; i < to; i++) {
    const c = buf[i];
    if ((c < 32 && c !== 9) || c === 127) throw bad('a chunk extension holds a control character');
  }
  return size;
}
