import { connect } from 'node:net';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import { hasContentLength, relayReplyChunk, streamServerBody, type ResponseSink, type ServerReply, type ServerRequest, type UpstreamConnection, type UpstreamConnectionError } from '@svc/http1';
import { filterResponseHeaders, maskedHost, requestHead, varyOnSandboxHeaders, type ScannedRequest } from './headers.ts';
import { asSvcError, sendProxyError, sendProxyErrorAndClose } from './error-response.ts';
import { passedOpen, presentedAccess } from './access-check.ts';
import { isKeepaliveFrame } from './keepalive-frames.ts';
import type { ProxyContext } from './proxy-context.ts';
import type { Target } from './target.ts';
import { CLIENT_CLOSED, countAnswered } from './proxy-metrics.ts';

/**
 * One client request proxied to a sandbox over a pooled keep-alive connection: the body is
 * streamed up and the response down as the bytes come, never buffered. A refused connection on
 * a route we believed running is re-resolved once (the sandbox may have just paused); a pooled
 * connection the backend closed under us is retried once, when no body byte was sent yet.
 */
export class HttpExchange implements ResponseSink {
  private conn: UpstreamConnection | undefined;
  private route: SandboxRoute | undefined;
  private port = 0;
  private head: string | undefined;
  private responded = false;
  private bodyStarted = false;
  private retried = false;
  private completed = false;
  /** The sandbox whose activity this exchange's bytes count as, once known. */
  private sandboxId: string | undefined;
  /** False for a request envd answers without its token (access-check.ts, passedOpen): not activity. */
  private counts = false;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly req: ServerRequest,
    private readonly res: ServerReply,
    private readonly scan: ScannedRequest,
    private readonly target: Target,
    /** When the request arrived (performance.now()): its duration is counted when the answer ends. */
    private readonly startedAt: number,
  ) {
    res.onClose(this.onClientClose);
  }

  /** Forwards to the route (a fresh cache hit), or resolves it first on the cold path. */
  start(route: SandboxRoute | undefined): void {
    if (route !== undefined) this.send(route);
    else this.resolveThenSend();
  }

  private resolveThenSend(): void {
    this.ctx.gate.runningRoute(this.target.sandboxId, this.target.port, presentedAccess(this.scan, this.req)).then(
      (route) => { if (!this.res.destroyed) this.send(route); },
      (err) => sendProxyError(this.res, this.refused(err)),
    );
  }

  private refused(err: unknown) {
    const e = asSvcError(err);
    this.ctx.logger.debug({ sandboxId: this.target.sandboxId, status: e.status }, 'request answered by the proxy');
    return e;
  }

  private send(route: SandboxRoute): void {
    // Not activity yet: only an answer from a process in the sandbox is (onHead, onBody), so a
    // poller of a port where nothing listens, answered 502 by the proxy, lets the sandbox idle
    // out (docs/data-plane.md, "Activity").
    this.sandboxId = route.sandboxId;
    this.counts = !passedOpen(route, this.target.port, this.scan.accessToken, this.req.method, this.req.url);
    const port = this.target.port || route.envdPort;
    if (this.head === undefined || this.port !== port || this.route?.address !== route.address) {
      this.head = requestHead(this.req.method, this.req.url, this.scan, `${route.address}:${port}`, maskedHost(route, port));
    }
    this.route = route;
    this.port = port;
    const conn = this.ctx.pool.acquire(`${route.address}:${port}`, () => ({ socket: connect({ host: route.address, port }), ready: 'connect' }));
    this.conn = conn;
    conn.start(this, this.head, this.req.method === 'HEAD', this.scan.hasBody, this.ctx.connectTimeoutMs);
    if (this.scan.hasBody) {
      // The body waits for the connection, so a refused connect can still be retried with it.
      conn.onceConnected(this.startBody);
    }
  }

  private readonly startBody = (): void => {
    const conn = this.conn;
    if (this.bodyStarted || conn === undefined) return;
    this.bodyStarted = true;
    // Each byte reached a process in the sandbox (the connection was made): activity.
    streamServerBody(this.req, conn, this.scan.chunkedBody, () => this.conn === conn, this.touch);
  };

  /** Counts as the sandbox's activity, unless nobody showed a token for this exchange (`counts`). */
  private readonly touch = (): void => {
    if (this.counts) this.ctx.activity.touch(this.sandboxId!);
  };

  onHead(status: number, statusText: string, headers: string[]): void {
    const res = this.res;
    if (res.destroyed) return;
    this.responded = true;
    this.touch();
    const relayed = filterResponseHeaders(headers);
    if (this.target.byHeaders) varyOnSandboxHeaders(relayed);
    try {
      res.writeHead(status, statusText || undefined, relayed);
    } catch {
      // A header node refuses to send (invalid characters): the response cannot be relayed.
      this.responded = false;
      this.conn?.destroy();
      sendProxyError(res, new SvcError(502, `sandbox ${this.target.sandboxId} sent an invalid response`));
      return;
    }
    // A streamed response (no Content-Length) shows its headers at once, before any data.
    if (!hasContentLength(headers)) res.flushHeaders();
  }

  onBody(chunk: Buffer): void {
    if (!isKeepaliveFrame(chunk)) this.touch();
    relayReplyChunk(this.res, chunk, this.conn, () => this.completed);
  }

  onComplete(trailers: string[] | undefined): void {
    this.completed = true;
    // The connection is the pool's again (or closed): nothing of this exchange may touch it now.
    const conn = this.conn;
    this.conn = undefined;
    if (conn !== undefined && this.scan.hasBody && BODY_UNDEFINED_METHODS.has(this.req.method)) this.giveUp(conn);
    if (this.bodyStarted && !this.req.complete) this.abandonRequestBody(conn);
    else this.res.end(undefined, trailers);
  }

  /**
   * Takes a connection back from the pool (it was released to it just before onComplete) and
   * closes it. A server may not read the body of a method that defines none: the bytes it left
   * would start the next request on the connection, and the pool shares connections between
   * clients, so one client's body would become another's request prefix, that client's headers
   * and tokens then read as its own (docs/data-plane.md, "What the proxy refuses to read").
   */
  private giveUp(conn: UpstreamConnection): void {
    this.ctx.pool.forget(conn);
    conn.destroy();
  }

  /**
   * The backend answered before it read the whole body (an early error): stop forwarding, drop
   * the connection (it is mid-body, so it can serve no other request), and read the rest of the
   * client's upload before ending the answer. Ended at once, the answer would let node close a
   * `Connection: close` client's socket under its upload, which then sees a reset (EPIPE) instead
   * of the answer already written to it.
   */
  private abandonRequestBody(conn: UpstreamConnection | undefined): void {
    conn?.destroy();
    void this.req.drain().then((whole) => {
      // Given up on (too much, too long): the connection closes after the answer.
      if (!whole) this.res.closeAfter();
      this.res.end();
    });
  }

  onFailure(err: UpstreamConnectionError, responseStarted: boolean): void {
    const conn = this.conn;
    const route = this.route!;
    if (this.responded || this.res.destroyed) { this.res.destroy(); return; }
    if (!this.retried && !this.bodyStarted && !responseStarted) {
      if (err.code === 'ECONNREFUSED') {
        // The cache said running; the sandbox may have paused since. Ask again, once.
        this.retried = true;
        this.ctx.purgeRoute(route.sandboxId);
        this.resolveThenSend();
        return;
      }
      if (conn?.reused && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
        this.retried = true;
        this.send(route);
        return;
      }
    }
    this.ctx.logger.warn({ sandboxId: route.sandboxId, port: this.port, code: err.code, timeout: err.timeout }, 'backend request failed');
    this.conn = undefined;
    const answer = backendError(err, route.sandboxId, this.port);
    // Nothing moved either way for the whole limit, the upload included: its client stalled,
    // and waiting for the rest of its body (sendProxyError's drain) would hold the connection on.
    if (err.timeout === 'io' && !this.req.complete) sendProxyErrorAndClose(this.res, answer);
    else sendProxyError(this.res, answer);
  }

  /** The answer ended, or the client left first (then 499, unless a head was sent already). */
  private readonly onClientClose = (): void => {
    countAnswered(this.res.headersSent ? this.res.statusCode : CLIENT_CLOSED, this.startedAt);
    if (!this.res.finished) {
      this.conn?.destroy();
      this.conn = undefined;
    }
  };
}

/** Methods whose request body has no meaning a server must honour (RFC 9110 9.3.1, 9.3.2, 9.3.5, 9.3.7, 9.3.8). */
const BODY_UNDEFINED_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'TRACE']);

export function backendError(err: UpstreamConnectionError, sandboxId: string, port: number): SvcError {
  if (err.timeout === 'io') return new SvcError(504, `sandbox ${sandboxId} sent nothing on port ${port} for ${duration(err.timeoutMs ?? 0)}`);
  if (err.code === 'ECONNREFUSED') return new SvcError(502, `sandbox ${sandboxId} is running but nothing listens on port ${port}`);
  if (err.code === 'ETIMEDOUT') return new SvcError(504, `sandbox ${sandboxId} did not accept a connection on port ${port} in time`);
  return new SvcError(502, `the connection to port ${port} of sandbox ${sandboxId} failed`);
}

const duration = (ms: number) => (ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 1_000)} s`);
