import type { EgressRequestRecord } from '@svc/contracts/egress-audit';
import { hasContentLength, InvalidHeaderError, relayReplyChunk, requestHead, streamServerBody, type ResponseSink, type ServerReply, type ServerRequest, type UpstreamConnection, type UpstreamConnectionError } from '@svc/http1';
import { sandboxResponseHeaders } from './headers.ts';
import type { ProxyDeps } from './proxy-deps.ts';
import type { ProxyVia } from './proxy-via.ts';
import { upstreamFailure, type PooledTarget } from './upstream.ts';

/** Reset errors that mean a pooled keep-alive socket had been closed by the upstream meanwhile. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** What an allowed request sends upstream: its head as decided (headers with the inject), and how its body comes. */
export interface ForwardRequest {
  method: string;
  path: string;
  /** Flat [name, value, ...], as upstreamRequestHeaders built them. */
  headers: string[];
  hasBody: boolean;
  /** The body came with Transfer-Encoding: the server de-chunked it, so it is chunked again. */
  chunkedBody: boolean;
}

/**
 * One allowed request from a sandbox forwarded on the shared lean HTTP/1.1 path (@svc/http1,
 * docs/design.md "One HTTP/1.1 path"): the head in one write on a pooled keep-alive connection,
 * the body streamed up once the connection is made, the response streamed down as it comes,
 * with backpressure both ways. A pooled connection the upstream closed meanwhile is retried once
 * on a new one, when no body byte was sent. Counts the bytes and the upstream's status into the
 * exchange's audit record; a failure is answered with `answer` (502/504 and why).
 */
export class ForwardExchange implements ResponseSink {
  private conn: UpstreamConnection | undefined;
  private responded = false;
  private bodyStarted = false;
  private retried = false;
  private completed = false;
  private head: string | undefined;
  /** What start sent, for the one retry on a new connection. */
  private request: ForwardRequest | undefined;

  constructor(
    private readonly deps: ProxyDeps,
    private readonly req: ServerRequest,
    private readonly res: ServerReply,
    private readonly upstream: PooledTarget,
    private readonly via: ProxyVia | undefined,
    private readonly record: EgressRequestRecord,
    private readonly answer: (status: number, message: string) => void,
  ) {
    res.onClose(() => {
      if (this.res.finished) return;
      // The sandbox left first: the upstream connection is mid-exchange and cannot serve another.
      this.conn?.destroy();
      this.conn = undefined;
    });
  }

  start(r: ForwardRequest): void {
    try {
      this.head = requestHead(r.method, r.path, r.headers);
    } catch (err) {
      if (!(err instanceof InvalidHeaderError)) throw err;
      // An inject whose secret holds a line break: never sent, since it would split the request.
      this.deps.logger.warn({ host: this.upstream.host, header: err.header }, 'egress request not sent: a header cannot be carried');
      this.answer(502, `egress proxy cannot send the request to ${this.upstream.host}: ${err.message}`);
      return;
    }
    this.request = r;
    this.send(r);
  }

  private send(r: ForwardRequest): void {
    const conn = this.deps.upstreams.connection(this.upstream, this.via);
    this.conn = conn;
    conn.start(this, this.head!, r.method === 'HEAD', r.hasBody, this.deps.upstreams.connectTimeoutMs);
    // The body waits for the connection, so that a stale pooled socket can still be retried.
    if (r.hasBody) conn.onceConnected(() => this.startBody(conn, r.chunkedBody));
  }

  private startBody(conn: UpstreamConnection, chunked: boolean): void {
    if (this.bodyStarted || this.conn !== conn) return;
    this.bodyStarted = true;
    streamServerBody(this.req, conn, chunked, () => this.conn === conn, (bytes) => { this.record.bytes_in += bytes; });
  }

  onHead(status: number, statusText: string, headers: string[]): void {
    const res = this.res;
    this.record.upstream_status = String(status);
    this.record.upstream_addr = `${this.upstream.ip}:${this.upstream.port}`;
    if (res.destroyed) return;
    this.responded = true;
    try {
      res.writeHead(status, statusText || undefined, sandboxResponseHeaders(headers));
    } catch (err) {
      // An answer the parser took but the reply will not repeat (a header holding CR, LF or NUL).
      this.responded = false;
      this.conn?.destroy();
      this.conn = undefined;
      this.deps.logger.info({ err: (err as Error).message, host: this.upstream.host, status }, 'egress upstream answer cannot be relayed');
      this.answer(502, `upstream ${this.upstream.host} sent an answer the proxy cannot relay: ${(err as Error).message}`);
      return;
    }
    // A streamed answer (server-sent events, say) shows its head at once, before any data.
    if (!hasContentLength(headers)) res.flushHeaders();
  }

  onBody(chunk: Buffer): void {
    this.record.bytes_out += chunk.length;
    if (this.responded) relayReplyChunk(this.res, chunk, this.conn, () => this.completed);
  }

  onComplete(trailers: string[] | undefined): void {
    this.completed = true;
    // The connection is the pool's again (or closed): nothing of this exchange may touch it now.
    const conn = this.conn;
    this.conn = undefined;
    if (!this.responded) return;
    if (this.bodyStarted && !this.req.complete) {
      // The upstream answered before it took the whole body: read the rest of the upload before
      // ending the answer, or a closing sandbox's socket would see a reset, not the answer. One
      // that uploads too much or too long gets the answer, and the connection closes.
      conn?.destroy();
      void this.req.drain().then((whole) => {
        if (!whole) this.res.closeAfter();
        this.res.end(undefined, trailers);
      });
    } else {
      this.res.end(undefined, trailers);
    }
  }

  onFailure(err: UpstreamConnectionError, responseStarted: boolean): void {
    const conn = this.conn;
    this.conn = undefined;
    if (this.res.destroyed) return; // the sandbox left first
    if (this.responded || this.res.headersSent) {
      this.deps.logger.debug({ host: this.upstream.host, code: err.code }, 'egress upstream answer cut short');
      this.res.destroy();
      return;
    }
    if (!this.retried && !this.bodyStarted && !responseStarted && conn?.reused && STALE_SOCKET_CODES.has(err.code ?? '')) {
      this.retried = true;
      this.send(this.request!);
      return;
    }
    const failure = upstreamFailure(err, this.upstream);
    this.deps.logger.debug({ host: this.upstream.host, ip: this.upstream.ip, port: this.upstream.port, failure: failure.failure, code: failure.code }, 'egress upstream failed');
    this.answer(failure.status, failure.message);
  }
}
