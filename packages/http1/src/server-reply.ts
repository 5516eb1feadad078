import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { assertSafeHeader, chunkedTail, InvalidHeaderError, splitsMessage } from './request-head.ts';
import type { ServerRequest } from './server-request.ts';

/** A first body chunk up to this size leaves in one buffer with the head. */
const SMALL_BODY = 16 * 1024;

/** The `Date` header's value, made at most once a second (node's server caches it the same way). */
let dateValue = '';
let dateSecond = 0;
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) { dateSecond = second; dateValue = new Date(now).toUTCString(); }
  return dateValue;
}

/** What a reply tells its connection. */
export interface ReplyOwner {
  /** The reply ended; `reusable`: the connection may carry the client's next request. */
  replied(reusable: boolean): void;
}

/**
 * The answer to one ServerRequest, written straight to the socket. The head is held until the
 * first body bytes (or the end) so that a small answer leaves in one write, as node's server
 * does. The framing is the server's: the upstream's Content-Length is kept, otherwise the body is
 * chunked (HTTP/1.1) or ends with the connection (HTTP/1.0); hop-by-hop headers are the caller's
 * to remove, Connection and Transfer-Encoding are set here.
 */
export class ServerReply {
  statusCode = 200;
  headersSent = false;
  /** end() was called: every byte is written (or queued on the socket). */
  finished = false;
  private head: string | undefined;
  private chunked = false;
  private noBody = false;
  private keepAlive: boolean;
  private closeCb: (() => void) | undefined;
  private closed = false;

  constructor(
    /** The request this answers. */
    readonly req: ServerRequest,
    private readonly socket: Socket,
    private readonly owner: ReplyOwner,
    keepAlive: boolean,
    private readonly keepAliveSeconds: number,
  ) {
    this.keepAlive = keepAlive;
  }

  /** The client's connection is gone, or this reply was abandoned. */
  get destroyed(): boolean { return this.closed || this.socket.destroyed || !this.socket.writable; }

  /**
   * Sets the status and headers (flat [name, value, ...]). Throws InvalidHeaderError, with
   * nothing sent, for a status text, name or value holding CR, LF or NUL (it would split the answer).
   */
  writeHead(status: number, statusText: string | undefined, headers: readonly string[]): void {
    if (this.headersSent || this.head !== undefined) throw new Error('the reply head was written already');
    if (statusText !== undefined && splitsMessage(statusText)) throw new InvalidHeaderError('status text');
    let head = `HTTP/1.1 ${status} ${statusText ?? STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    let length = false;
    let date = false;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i];
      const value = headers[i + 1];
      assertSafeHeader(name, value);
      switch (name.length) {
        case 4:
          if (!date && name.toLowerCase() === 'date') date = true;
          break;
        case 10: // ours to set
          if (name.toLowerCase() === 'connection') continue;
          break;
        case 14:
          if (name.toLowerCase() === 'content-length') length = true;
          break;
        case 17: // the framing is this hop's: set below
          if (name.toLowerCase() === 'transfer-encoding') continue;
          break;
      }
      head += `${name}: ${value}\r\n`;
    }
    if (!date) head += `Date: ${httpDate()}\r\n`;
    this.noBody = this.req.method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200);
    if (!this.noBody && !length) {
      if (this.req.httpVersionMinor === 1) { this.chunked = true; head += 'Transfer-Encoding: chunked\r\n'; }
      else this.keepAlive = false; // an HTTP/1.0 client learns the end from the close
    }
    if (!this.keepAlive) head += 'Connection: close\r\n';
    else head += `Connection: keep-alive\r\nKeep-Alive: timeout=${this.keepAliveSeconds}\r\n`;
    this.statusCode = status;
    this.head = `${head}\r\n`;
  }

  /** The connection closes after this answer (say so before writeHead). */
  closeAfter(): void { this.keepAlive = false; }

  /** Sends the head now (a streamed answer shows its headers before its first bytes). */
  flushHeaders(): void {
    if (this.head === undefined || this.destroyed) return;
    this.socket.write(this.head, 'latin1');
    this.head = undefined;
    this.headersSent = true;
  }

  /** Writes body bytes; false when the socket is full (then wait for onceDrain). */
  write(chunk: Buffer | string): boolean {
    if (this.finished || this.destroyed) return true;
    if (this.noBody || chunk.length === 0) { this.flushHeaders(); return true; }
    const socket = this.socket;
    const head = this.head;
    if (head === undefined && !this.chunked) return socket.write(chunk);
    if (head !== undefined && !this.chunked && chunk.length <= SMALL_BODY) {
      // A small answer whole: one buffer, one write, rather than a corked writev through the
      // stream machinery (about 3 µs less per request, most answers being this).
      this.head = undefined;
      this.headersSent = true;
      const body = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      const out = Buffer.allocUnsafe(head.length + body.length);
      out.write(head, 0, 'latin1');
      body.copy(out, head.length);
      return socket.write(out);
    }
    socket.cork();
    if (head !== undefined) { socket.write(head, 'latin1'); this.head = undefined; this.headersSent = true; }
    let ok: boolean;
    if (this.chunked) {
      socket.write(`${Buffer.byteLength(chunk).toString(16)}\r\n`, 'latin1');
      socket.write(chunk);
      ok = socket.write('\r\n', 'latin1');
    } else {
      ok = socket.write(chunk);
    }
    socket.uncork();
    return ok;
  }

  /** Runs `cb` once the socket takes writes again. */
  onceDrain(cb: () => void): void {
    this.socket.once('drain', cb);
  }

  /** Ends the answer: the chunked terminator with any trailers (flat [name, value, ...]). */
  end(chunk?: Buffer | string, trailers?: readonly string[]): void {
    if (this.finished || this.destroyed) return;
    if (chunk !== undefined) this.write(chunk);
    // A trailer that could split the answer is dropped, not sent.
    const tail = this.chunked ? chunkedTail(trailers) : '';
    const head = this.head;
    this.head = undefined;
    this.headersSent = true;
    if (head !== undefined || tail !== '') this.socket.write((head ?? '') + tail, 'latin1');
    this.finished = true;
    this.owner.replied(this.keepAlive);
    this.fireClose();
  }

  /** Abandons the answer and the connection (a broken upstream mid-answer). */
  destroy(): void {
    this.closed = true;
    this.socket.destroy();
    this.fireClose();
  }

  /** Runs `cb` once: when the answer ends, or when the client's connection closes first. */
  onClose(cb: () => void): void {
    if (this.finished || this.closed) { queueMicrotask(cb); return; }
    const prev = this.closeCb;
    this.closeCb = prev === undefined ? cb : () => { prev(); cb(); };
  }

  /** @internal The connection closed under the reply. */
  socketClosed(): void {
    this.closed = true;
    this.fireClose();
  }

  private fireClose(): void {
    const cb = this.closeCb;
    this.closeCb = undefined;
    cb?.();
  }
}
