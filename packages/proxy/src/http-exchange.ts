import { request as httpRequest, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/master/internal-api';
import { filterResponseHeaders, type ScannedRequest } from './headers.ts';
import { asSvcError, sendProxyError } from './error-response.ts';
import type { ProxyContext } from './proxy-context.ts';
import type { Target } from './target.ts';

/**
 * One client request proxied to a sandbox: streams the body up and the response down as the
 * bytes come, never buffering. A refused connection on a route we believed running is
 * re-resolved once (the sandbox may have just paused); an idle keep-alive socket that the
 * backend closed under us is retried once for bodiless requests.
 */
export class HttpExchange {
  private upReq: ClientRequest | undefined;
  private responded = false;
  private bodyStarted = false;
  private retried = false;
  private trackedId: string | undefined;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly scan: ScannedRequest,
    private readonly target: Target,
  ) {
    res.once('close', this.onClientClose);
  }

  /** Forwards to the route (a fresh cache hit), or resolves it first on the cold path. */
  start(route: SandboxRoute | undefined): void {
    if (route !== undefined) this.send(route);
    else this.resolveThenSend();
  }

  private resolveThenSend(): void {
    this.ctx.gate.runningRoute(this.target.sandboxId, this.scan.trafficTokens).then(
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
    if (this.trackedId === undefined) {
      this.trackedId = route.sandboxId;
      this.ctx.activity.begin(route.sandboxId);
    }
    const port = this.target.port || route.envdPort;
    const upReq = httpRequest({
      host: route.address,
      port,
      method: this.req.method,
      path: this.req.url,
      headers: this.scan.forward as unknown as Record<string, string>,
      agent: this.ctx.agents.for(route.address),
      setHost: false,
    });
    this.upReq = upReq;
    upReq.on('response', this.onResponse);
    upReq.on('error', (err: NodeJS.ErrnoException) => this.onUpstreamError(err, route, port, upReq));
    upReq.once('socket', this.onSocket);
    if (!this.scan.hasBody) upReq.end();
  }

  private readonly onSocket = (sock: Socket): void => {
    if (!sock.connecting) {
      if (this.scan.hasBody) this.startBody();
      return;
    }
    const upReq = this.upReq!;
    const timer = setTimeout(() => upReq.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), this.ctx.connectTimeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      // The body waits for the connection, so a refused connect can still be retried with it.
      if (this.scan.hasBody) this.startBody();
    });
    sock.once('close', () => clearTimeout(timer));
  };

  private readonly startBody = (): void => {
    if (this.bodyStarted || this.upReq === undefined) return;
    this.bodyStarted = true;
    this.req.pipe(this.upReq);
    this.req.once('error', () => this.upReq?.destroy());
  };

  private readonly onResponse = (upRes: IncomingMessage): void => {
    this.responded = true;
    const res = this.res;
    res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, filterResponseHeaders(upRes.rawHeaders));
    // A streamed response (no Content-Length) shows its headers at once, before any data.
    if (upRes.headers['content-length'] === undefined) res.flushHeaders();
    upRes.pipe(res, { end: false });
    upRes.once('end', () => {
      if (upRes.rawTrailers.length > 0) res.addTrailers(pairs(upRes.rawTrailers));
      res.end();
    });
    upRes.once('close', () => { if (!upRes.complete) res.destroy(); });
  };

  private onUpstreamError(err: NodeJS.ErrnoException, route: SandboxRoute, port: number, upReq: ClientRequest): void {
    if (upReq !== this.upReq) return;
    if (this.responded || this.res.destroyed) { this.res.destroy(); return; }
    if (!this.retried && !this.bodyStarted) {
      if (err.code === 'ECONNREFUSED') {
        // The cache said running; the sandbox may have paused since. Ask again, once.
        this.retried = true;
        this.ctx.purgeRoute(route.sandboxId);
        this.resolveThenSend();
        return;
      }
      if (err.code === 'ECONNRESET' && upReq.reusedSocket) {
        this.retried = true;
        this.send(route);
        return;
      }
    }
    this.ctx.logger.warn({ sandboxId: route.sandboxId, port, code: err.code }, 'backend request failed');
    sendProxyError(this.res, backendError(err, route.sandboxId, port));
  }

  private readonly onClientClose = (): void => {
    if (this.trackedId !== undefined) this.ctx.activity.end(this.trackedId);
    if (!this.res.writableFinished) this.upReq?.destroy();
  };
}

export function backendError(err: NodeJS.ErrnoException, sandboxId: string, port: number): SvcError {
  if (err.code === 'ECONNREFUSED') return new SvcError(502, `sandbox ${sandboxId} is running but nothing listens on port ${port}`);
  if (err.code === 'ETIMEDOUT') return new SvcError(504, `sandbox ${sandboxId} did not accept a connection on port ${port} in time`);
  return new SvcError(502, `the connection to port ${port} of sandbox ${sandboxId} failed`);
}

function pairs(raw: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}
