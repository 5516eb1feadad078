/**
 * An incremental HTTP/1.x response parser for the proxy's own backend connections. Bodies are
 * handed on as slices of the received buffers (no copies); chunked bodies are decoded, since the
 * client side re-frames them. node's http client does the same job at about three times the CPU
 * cost per request, which is most of a proxy's budget.
 */

import { isToken, MAX_TRAILER_BYTES } from './request-head.ts';

export interface ResponseEvents {
  onHead(status: number, statusText: string, headers: string[]): void;
  onBody(chunk: Buffer): void;
  /** The response is complete. keepAlive: the connection may carry another request. */
  onComplete(trailers: string[] | undefined, keepAlive: boolean): void;
}

export class ResponseParseError extends Error {
  readonly code = 'HPE_INVALID_RESPONSE';
}

const enum S { Head, Fixed, ChunkSize, ChunkData, ChunkEnd, Trailers, UntilClose, Done }

const MAX_HEAD = 64 * 1024;
const MAX_LINE = 8 * 1024;
const CRLF = Buffer.from('\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');

export class ResponseParser {
  private state = S.Done;
  private pending: Buffer | undefined;
  private remaining = 0;
  private keepAlive = true;
  private headRequest = false;
  private trailers: string[] | undefined;
  private trailerBytes = 0;
  /** True once any byte of the current response arrived. */
  started = false;

  constructor(private readonly ev: ResponseEvents) {}

  /** Prepares for the response to the next request. */
  expect(headRequest: boolean): void {
    this.state = S.Head;
    this.pending = undefined;
    this.remaining = 0;
    this.keepAlive = true;
    this.headRequest = headRequest;
    this.trailers = undefined;
    this.trailerBytes = 0;
    this.started = false;
  }

  get done(): boolean { return this.state === S.Done; }

  /** Feeds received bytes. Throws ResponseParseError on a malformed response. */
  execute(chunk: Buffer): void {
    if (this.state === S.Done) { this.keepAlive = false; return; } // bytes nobody asked for
    this.started = true;
    let buf = chunk;
    if (this.pending !== undefined) { buf = Buffer.concat([this.pending, chunk]); this.pending = undefined; }
    let pos = 0;
    const len = buf.length;
    while (pos < len) {
      switch (this.state as S) {
        case S.Head: {
          const end = buf.indexOf(CRLFCRLF, pos);
          if (end < 0) return this.keep(buf, pos, MAX_HEAD);
          this.parseHead(buf.toString('latin1', pos, end));
          pos = end + 4;
          if ((this.state as S) === S.Done) return this.complete(pos < len);
          break;
        }
        case S.Fixed:
        case S.ChunkData: {
          const n = Math.min(this.remaining, len - pos);
          this.remaining -= n;
          const body = pos === 0 && n === len ? buf : buf.subarray(pos, pos + n);
          pos += n;
          if (this.remaining === 0) this.state = this.state === S.Fixed ? S.Done : S.ChunkEnd;
          this.ev.onBody(body);
          if (this.state === S.Done) return this.complete(pos < len);
          break;
        }
        case S.ChunkSize: {
          const end = buf.indexOf(CRLF, pos);
          if (end < 0) return this.keep(buf, pos, MAX_LINE);
          const size = parseChunkSize(buf, pos, end);
          pos = end + 2;
          if (size === 0) { this.state = S.Trailers; } else { this.remaining = size; this.state = S.ChunkData; }
          break;
        }
        case S.ChunkEnd:
          if (len - pos < 2) return this.keep(buf, pos, 2);
          if (buf[pos] !== 13 || buf[pos + 1] !== 10) throw new ResponseParseError('chunk not followed by CRLF');
          pos += 2;
          this.state = S.ChunkSize;
          break;
        case S.Trailers: {
          const end = buf.indexOf(CRLF, pos);
          if (end < 0) return this.keep(buf, pos, MAX_LINE);
          if (end === pos) {
            this.state = S.Done;
            return this.complete(end + 2 < len);
          }
          this.trailerBytes += end - pos;
          if (this.trailerBytes > MAX_TRAILER_BYTES) throw new ResponseParseError('response trailers are too large');
          this.trailer(buf.toString('latin1', pos, end));
          pos = end + 2;
          break;
        }
        case S.UntilClose:
          this.ev.onBody(pos === 0 ? buf : buf.subarray(pos));
          return;
        case S.Done:
          // Bytes after a complete response: the backend is not speaking plain HTTP/1.1 to us.
          this.keepAlive = false;
          return;
      }
    }
  }

  /** The backend closed the connection. True when that ended the response normally. */
  eof(): boolean {
    if (this.state === S.UntilClose) {
      this.state = S.Done;
      this.keepAlive = false;
      this.complete(false);
      return true;
    }
    return this.state === S.Done;
  }

  private keep(buf: Buffer, pos: number, limit: number): void {
    if (buf.length - pos > limit) throw new ResponseParseError('response head or line too long');
    this.pending = pos === 0 ? buf : buf.subarray(pos);
  }

  /**
   * A trailer is relayed as a header would be, so its name must be a token as a header's must.
   * One that is not (no colon, a folded line) is dropped, not relayed: the body before it has
   * reached the client already, and refusing it now would cut a whole response short.
   */
  private trailer(line: string): void {
    const colon = line.indexOf(':');
    if (colon <= 0 || !isToken(line, colon)) return;
    (this.trailers ??= []).push(line.slice(0, colon), line.slice(colon + 1).trim());
  }

  /** extraBytes: more arrived than the response holds, so the connection cannot be trusted again. */
  private complete(extraBytes: boolean): void {
    if (extraBytes) this.keepAlive = false;
    this.ev.onComplete(this.trailers, this.keepAlive);
  }

  private parseHead(text: string): void {
    const lines = text.split('\r\n');
    const statusLine = lines[0];
    if (!statusLine.startsWith('HTTP/1.') || statusLine.length < 12 || statusLine.charCodeAt(8) !== 32
      || (statusLine.length > 12 && statusLine.charCodeAt(12) !== 32)) {
      throw new ResponseParseError('bad status line');
    }
    const minor = statusLine.charCodeAt(7) - 48;
    const status = Number(statusLine.slice(9, 12));
    if (!(status >= 100 && status <= 999)) throw new ResponseParseError('bad status code');
    const statusText = statusLine.length > 13 ? statusLine.slice(13) : '';
    // A bare CR or LF (or another control character) in the reason would split the answer relayed on.
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(statusText)) throw new ResponseParseError('bad status text');
    const headers: string[] = [];
    let contentLength = -1;
    let chunked = false;
    let otherCoding = false;
    let connection = '';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(':');
      if (colon <= 0) throw new ResponseParseError('bad header line');
      // A name that is no token (a space, a bracket, a byte past ASCII) is refused, as node's own
      // client refuses it: relayed, a client or an intermediary could read the head otherwise.
      if (!isToken(line, colon)) throw new ResponseParseError('bad header name');
      const name = line.slice(0, colon);
      const value = line.slice(colon + 1).trim();
      switch (name.length) {
        case 10:
          if (name.toLowerCase() === 'connection') connection = connection ? `${connection},${value}` : value;
          break;
        case 14:
          if (name.toLowerCase() === 'content-length') {
            if (!/^\d{1,15}$/.test(value)) throw new ResponseParseError('bad content-length');
            const n = Number(value);
            if (contentLength >= 0 && contentLength !== n) throw new ResponseParseError('conflicting content-length');
            contentLength = n;
          }
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding') {
            const codings = value.toLowerCase().split(',');
            chunked = codings[codings.length - 1].trim() === 'chunked';
            otherCoding = !chunked;
          }
          break;
      }
      headers.push(name, value);
    }
    // Both framings at once (RFC 9112 6.3: a sender must not): relayed, the Content-Length would
    // end the answer early and leave the rest to be read as the next answer on the client's
    // keep-alive connection. Refused, as node's http client refuses it.
    if ((chunked || otherCoding) && contentLength >= 0) throw new ResponseParseError('both Transfer-Encoding and Content-Length');
    const conn = connection.toLowerCase();
    this.keepAlive = minor === 1 ? !conn.includes('close') : conn.includes('keep-alive');

    if (status < 200 && status !== 101) {
      // 1xx informational (103 Early Hints, a stray 100 Continue): the real response follows.
      this.state = S.Head;
      return;
    }
    if (status === 101) throw new ResponseParseError('unexpected protocol switch');
    this.ev.onHead(status, statusText, headers);
    if (this.headRequest || status === 204 || status === 304) {
      this.state = S.Done;
    } else if (chunked) {
      this.state = S.ChunkSize;
    } else if (otherCoding || contentLength < 0) {
      this.state = S.UntilClose;
      this.keepAlive = false;
    } else if (contentLength === 0) {
      this.state = S.Done;
    } else {
      this.remaining = contentLength;
      this.state = S.Fixed;
    }
  }
}

function parseChunkSize(buf: Buffer, from: number, to: number): number {
  let size = 0;
  let digits = 0;
  for (let i = from; i < to; i++) {
    const c = buf[i];
    let v: number;
    if (c >= 48 && c <= 57) v = c - 48;
    else if (c >= 97 && c <= 102) v = c - 87;
    else if (c >= 65 && c <= 70) v = c - 55;
    else if (c === 59 || c === 32 || c === 9) break; // chunk extensions
    else throw new ResponseParseError('bad chunk size');
    size = size * 16 + v;
    if (++digits > 12) throw new ResponseParseError('chunk too large');
  }
  if (digits === 0) throw new ResponseParseError('bad chunk size');
  return size;
}
