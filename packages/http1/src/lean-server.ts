/**
 * The proxies' client side without node's HTTP server (docs/design.md "One HTTP/1.1 path"): a
 * connection is read by RequestParser, each request handed on as a ServerRequest and answered
 * through a ServerReply written straight to the socket. Requests on a connection are served one
 * at a time in order; a pipelined request waits, unparsed, until the one before it is answered.
 * Measured on this machine (docs/benchmarks.md, "Proxies against nginx"), node's server,
 * IncomingMessage and ServerResponse were more than half of the data-plane proxy's CPU per
 * request, where a bare node byte relay costs 1.15× nginx's.
 */
import type { Server, Socket } from 'node:net';
import { RequestParseError, RequestParser, type RequestEvents, type RequestHead } from './request-parser.ts';
import { ServerReply, type ReplyOwner } from './server-reply.ts';
import { ServerRequest } from './server-request.ts';
import { IdleTimer } from './socket-quiet.ts';

export interface LeanHandler {
  onRequest(req: ServerRequest, reply: ServerReply): void;
  /**
   * An Upgrade or CONNECT request: the socket is the handler's from now on; `head` is what
   * followed the request's head. It is handed over paused: the handler reads (pipe, resume)
   * when it is ready, and nothing sent meanwhile is lost.
   */
  onUpgrade(req: ServerRequest, socket: Socket, head: Buffer): void;
  /**
   * A request that cannot be read (RequestParseError), or whose head did not arrive in time
   * (status 408): the handler answers on the socket and ends it.
   */
  onClientError(err: RequestParseError, socket: Socket): void;
  /** A handler threw while a request was read (a bug): its connection is closed, and this says why. */
  onInternalError(err: unknown): void;
}

export interface LeanServerOptions {
  /** An idle connection between requests closes after this. */
  keepAliveTimeoutMs: number;
  /** A request head must arrive whole within this of its first byte. */
  headersTimeoutMs: number;
  /**
   * While a request is served, the connection closes after this long without a byte either way
   * (0 or absent: never; the upstream's own limits answer first).
   */
  requestIdleTimeoutMs?: number;
}

/**
 * Serves HTTP/1.1 on a listener's connections (a net.Server's 'connection' or a tls.Server's
 * 'secureConnection'); answers closeAll(), which ends every connection it serves. A client that
 * ends its side is gone, as with node's server (its listener is not `allowHalfOpen`): a request in
 * flight is then abandoned, and counted so.
 */
export class LeanServer {
  private readonly connections = new Set<ServerConnection>();

  constructor(private readonly handler: LeanHandler, private readonly o: LeanServerOptions) {}

  /** Serves the connections `server` accepts (`event`: 'connection' or, for TLS, 'secureConnection'). */
  attach(server: Server, event: 'connection' | 'secureConnection'): void {
    server.on(event, (socket: Socket) => this.serve(socket));
  }

  serve(socket: Socket): void {
    const conn = new ServerConnection(socket, this.handler, this.o, () => this.connections.delete(conn));
    this.connections.add(conn);
  }

  get connectionCount(): number { return this.connections.size; }

  /** Closes every connection (an answer in flight is cut). */
  closeAll(): void {
    for (const c of this.connections) c.destroy();
    this.connections.clear();
  }
}

/** Bytes of pipelined requests held while the one before is answered; beyond, the socket is not read. */
const MAX_PIPELINED = 64 * 1024;

class ServerConnection implements RequestEvents, ReplyOwner {
  private readonly parser = new RequestParser(this);
  private req: ServerRequest | undefined;
  private reply: ServerReply | undefined;
  private headTimer: NodeJS.Timeout | undefined;
  /** The reply ended and the connection closes once the request's body is read too. */
  private closeAfterBody = false;
  private detached = false;
  /** The parser is running (its events are being handled). */
  private parsing = false;
  /** The request was answered while the parser ran: move on once it returns. */
  private nextDue = false;
  private readonly flow = { pause: () => this.socket.pause(), resume: () => { if (!this.detached) this.socket.resume(); } };
  /** Keep-alive between requests, the request's own limit during one. */
  private readonly idle: IdleTimer;

  constructor(private readonly socket: Socket, private readonly handler: LeanHandler, private readonly o: LeanServerOptions, private readonly gone: () => void) {
    socket.setNoDelay(true);
    this.idle = new IdleTimer(socket);
    this.idle.arm(o.keepAliveTimeoutMs);
    socket.on('data', this.onData);
    socket.on('timeout', this.onTimeout);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
  }

  destroy(): void { this.socket.destroy(); }

  private readonly onData = (chunk: Buffer): void => { this.runParser(() => this.parser.execute(chunk)); };

  /**
   * Runs the parser, whose events may answer a request at once (a handler replying
   * synchronously): the move to the next request then waits until the parser has returned and
   * kept the bytes that follow, which it parses next.
   */
  private runParser(feed: () => Buffer | undefined): void {
    let upgraded: Buffer | undefined;
    this.parsing = true;
    try {
      upgraded = feed();
    } catch (err) {
      this.parsing = false;
      this.nextDue = false;
      this.refuse(err);
      return;
    }
    this.parsing = false;
    if (upgraded !== undefined) { this.upgrade(upgraded); return; }
    if (this.nextDue) { this.nextDue = false; this.nextRequest(); return; }
    if (this.parser.done && this.parser.buffered > MAX_PIPELINED) this.socket.pause();
    this.watchHead();
  }

  /** A head that started arriving must be whole within headersTimeoutMs (a slow client holds a connection, not the proxy). */
  private watchHead(): void {
    if (this.req !== undefined || !this.parser.started || this.headTimer !== undefined) return;
    this.idle.arm(0);
    this.headTimer = setTimeout(() => this.refuse(new RequestParseError(408, 'request timed out')), this.o.headersTimeoutMs);
  }

  onRequest(head: RequestHead): void {
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    // The keep-alive limit stays armed while the request is served, and onTimeout holds it to
    // the request's own limit: two new timers less per request than arming each in turn.
    this.idle.arm(this.o.keepAliveTimeoutMs);
    const req = new ServerRequest(head, this.socket, this.flow);
    this.req = req;
    if (head.upgrade) return; // handed over by upgrade(), with what followed the head
    if (head.expectContinue) this.socket.write('HTTP/1.1 100 Continue\r\n\r\n', 'latin1');
    const reply = new ServerReply(req, this.socket, this, head.keepAlive, Math.round(this.o.keepAliveTimeoutMs / 1000));
    this.reply = reply;
    this.handler.onRequest(req, reply);
  }

  onBody(chunk: Buffer): void {
    const req = this.req;
    if (req === undefined) return;
    if (this.reply?.finished && !req.draining) return; // answered already: the rest is read and dropped
    req.push(chunk);
  }

  onEnd(trailers: string[] | undefined): void {
    const req = this.req;
    if (req === undefined) return;
    req.end(trailers);
    if (this.reply?.finished) this.nextRequest();
  }

  /** ReplyOwner: the answer ended. The next request is read once this one's body is too. */
  replied(reusable: boolean): void {
    const req = this.req;
    if (!reusable) this.closeAfterBody = true;
    if (req === undefined || req.complete) { this.nextRequest(); return; }
    // The body is still coming (an early answer): read it to its end, dropped, unless the
    // connection closes anyway.
    if (this.closeAfterBody) { this.socket.end(); return; }
    this.socket.resume();
  }

  private nextRequest(): void {
    if (this.parsing) { this.nextDue = true; return; }
    this.req = undefined;
    this.reply = undefined;
    if (this.closeAfterBody) { this.socket.end(); return; }
    this.idle.arm(this.o.keepAliveTimeoutMs);
    this.socket.resume();
    this.runParser(() => this.parser.next());
  }

  /**
   * Hands the socket over paused, so that no byte the client sends before the handler reads
   * (pipe or resume) is lost, and with an error listener, so that a reset before the handler
   * adds its own cannot crash the process.
   */
  private upgrade(rest: Buffer): void {
    const req = this.req!;
    this.detach();
    this.socket.pause();
    this.socket.on('error', () => this.socket.destroy());
    this.handler.onUpgrade(req, this.socket, rest);
  }

  /** The socket is no longer ours: an upgrade's handler owns it, and its events. */
  private detach(): void {
    this.detached = true;
    clearTimeout(this.headTimer);
    this.idle.arm(0);
    this.socket.off('data', this.onData);
    this.socket.off('timeout', this.onTimeout);
    this.socket.off('error', this.onError);
    this.socket.off('close', this.onClose);
    this.gone();
  }

  private refuse(err: unknown): void {
    this.detach();
    if (err instanceof RequestParseError && !this.socket.destroyed && this.reply === undefined) {
      this.socket.pause();
      this.socket.on('error', () => this.socket.destroy()); // the client reset while refused: nothing to tell
      this.handler.onClientError(err, this.socket);
    } else {
      // A protocol error mid-body or while an answer is on its way, or a handler that threw:
      // the connection cannot go on.
      this.reply?.socketClosed();
      this.req?.abort();
      this.socket.destroy();
      if (!(err instanceof RequestParseError)) this.handler.onInternalError(err);
    }
  }


  private readonly onTimeout = (): void => {
    if (this.req === undefined) { this.socket.destroy(); return; }
    // A request is being served: the keep-alive limit ran out, the request's own decides. None:
    // node arms the timer again at the next byte either way.
    const limit = this.o.requestIdleTimeoutMs ?? 0;
    if (limit === 0) return;
    if (this.idle.expired(limit)) this.socket.destroy();
  };

  // A client's reset is ordinary; the close that follows cleans up.
  private readonly onError = (): void => { this.socket.destroy(); };

  private readonly onClose = (): void => {
    clearTimeout(this.headTimer);
    this.req?.abort();
    this.reply?.socketClosed();
    this.gone();
  };
}
