import type { Socket } from 'node:net';
import { SvcError, tracingOn } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { LeanHandler, RequestParseError, ServerReply, ServerRequest } from '@svc/http1';
import type { BackendCache } from './backend-cache.ts';
import { sendProxyError, sendProxyErrorOnSocket } from './error-response.ts';
import { addForwardedHeaders, scanRequestHeaders, type ScannedRequest } from './headers.ts';
import { HttpExchange } from './http-exchange.ts';
import type { ProxyContext } from './proxy-context.ts';
import { requestTarget, type Target } from './target.ts';
import { accessRefusal, presentedAccess } from './access-check.ts';
import { SignedFileUrls } from './signed-file-urls.ts';
import { UpgradeExchange } from './upgrade-exchange.ts';
import { CLIENT_CLOSED, countAnswered } from './proxy-metrics.ts';
import { traceRequest, traceUpgrade } from './proxy-tracing.ts';

const NO_TARGET = new SvcError(400, 'no sandbox named: use the host <port>-<sandboxID>.<domain> or the E2b-Sandbox-Id and E2b-Sandbox-Port headers');

const NO_CONNECT = new SvcError(405, 'CONNECT is not served here: the data plane forwards requests to sandboxes by host or header');

/**
 * Entry points of the data-plane listeners (the lean server's handler). The hot path (a fresh
 * cache hit on a running sandbox) does no I/O before forwarding: scan headers, check the token,
 * forward.
 */
export class DataPlane implements LeanHandler {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly cache: BackendCache,
    private readonly proto: 'http' | 'https',
  ) {}

  readonly onRequest = (req: ServerRequest, res: ServerReply): void => {
    const startedAt = performance.now();
    const scan = scanRequestHeaders(req.rawHeaders);
    const target = targetOf(scan, req.url);
    // Traced, the rest runs in the request's span: a route lookup carries it on to the master.
    if (tracingOn()) traceRequest(req, res, scan, named(target), () => this.forward(req, res, scan, target, startedAt));
    else this.forward(req, res, scan, target, startedAt);
  };

  private forward(req: ServerRequest, res: ServerReply, scan: ScannedRequest, target: Target | null | SvcError, startedAt: number): void {
    if (target instanceof SvcError) { this.answer(res, target, startedAt); return; }
    if (target === null) {
      if (SignedFileUrls.matches(req.url)) this.forwardSignedFileUrl(req, res, scan, startedAt);
      else this.answer(res, NO_TARGET, startedAt);
      return;
    }
    const route = this.hotRoute(target, scan, req);
    if (route instanceof SvcError) { this.reject(target, route); this.answer(res, route, startedAt); return; }
    addForwardedHeaders(scan, req.remoteAddress, this.proto);
    new HttpExchange(this.ctx, req, res, scan, target, startedAt).start(route);
  }

  /** The proxy's own answer before any exchange began, counted (an exchange counts its own). */
  private answer(res: ServerReply, err: SvcError, startedAt: number): void {
    countAnswered(err.status, startedAt);
    sendProxyError(res, err);
  }

  /** A signed `/files` URL that names no sandbox: the signature says whose it is (401 when nobody's). */
  private forwardSignedFileUrl(req: ServerRequest, res: ServerReply, scan: ScannedRequest, startedAt: number): void {
    this.ctx.signedFiles.sandboxOf(req.method, req.url, req.remoteAddress).then((sandboxId) => {
      if (res.destroyed) { countAnswered(CLIENT_CLOSED, startedAt); return; }
      const target = { sandboxId, port: 0 };
      addForwardedHeaders(scan, req.remoteAddress, this.proto);
      // The cold path checks the signature against that sandbox again, expiry included.
      new HttpExchange(this.ctx, req, res, scan, target, startedAt).start(undefined);
    }, (err: unknown) => this.answer(res, err instanceof SvcError ? err : new SvcError(503, 'sandbox routing failed'), startedAt));
  }

  readonly onUpgrade = (req: ServerRequest, socket: Socket, head: Buffer): void => {
    if (req.method === 'CONNECT') { sendProxyErrorOnSocket(socket, NO_CONNECT); return; }
    const scan = scanRequestHeaders(req.rawHeaders);
    const target = targetOf(scan, req.url);
    if (tracingOn()) traceUpgrade(req, socket, scan, named(target), () => this.upgrade(req, socket, head, scan, target));
    else this.upgrade(req, socket, head, scan, target);
  };

  private upgrade(req: ServerRequest, socket: Socket, head: Buffer, scan: ScannedRequest, target: Target | null | SvcError): void {
    if (target instanceof SvcError) { sendProxyErrorOnSocket(socket, target); return; }
    if (target === null) { sendProxyErrorOnSocket(socket, NO_TARGET); return; }
    const route = this.hotRoute(target, scan, req, true);
    if (route instanceof SvcError) { this.reject(target, route); sendProxyErrorOnSocket(socket, route); return; }
    addForwardedHeaders(scan, req.remoteAddress, this.proto);
    new UpgradeExchange(this.ctx, req, socket, head, scan, target).start(route);
  }

  /** A request that cannot be read: the same JSON answer as every other of the proxy's, then the connection ends. */
  readonly onClientError = (err: RequestParseError, socket: Socket): void => {
    this.ctx.logger.debug({ status: err.status, reason: err.message }, 'malformed client request');
    sendProxyErrorOnSocket(socket, new SvcError(err.status, err.message));
  };

  readonly onInternalError = (err: unknown): void => {
    this.ctx.logger.error({ err: err instanceof Error ? err.stack : String(err) }, 'the data plane failed on a request; its connection was closed');
  };

  private reject(target: Target, refusal: SvcError): void {
    this.ctx.logger.debug({ sandboxId: target.sandboxId, port: target.port, status: refusal.status }, 'request refused by the access check');
  }

  /** A fresh running route from the cache; the refusal when its access check fails; undefined: cold path. */
  private hotRoute(target: Target, scan: ScannedRequest, req: ServerRequest, upgrade = false): SandboxRoute | SvcError | undefined {
    const route = this.cache.fresh(target.sandboxId);
    if (route === undefined || route.state !== 'running') return undefined;
    return accessRefusal(route, target.port, presentedAccess(scan, req, upgrade)) ?? route;
  }
}

/** The sandbox the request names, null for none, or why it is refused before any routing (400). */
function targetOf(scan: ScannedRequest, url: string): Target | null | SvcError {
  return scan.refusal !== undefined ? new SvcError(400, scan.refusal) : requestTarget(scan, url);
}

/** The target a span names: none for a request refused before routing. */
const named = (target: Target | null | SvcError): Target | null => (target instanceof SvcError ? null : target);
