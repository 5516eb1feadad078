import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { BackendCache } from './backend-cache.ts';
import { sendProxyError, sendProxyErrorOnSocket } from './error-response.ts';
import { addForwardedHeaders, scanRequestHeaders, type ScannedRequest } from './headers.ts';
import { HttpExchange } from './http-exchange.ts';
import type { ProxyContext } from './proxy-context.ts';
import { targetFromHeaders, targetFromHost, type Target } from './target.ts';
import { accessRefusal, presentedAccess } from './access-check.ts';
import { SignedFileUrls } from './signed-file-urls.ts';
import { UpgradeExchange } from './upgrade-exchange.ts';

const NO_TARGET = new SvcError(400, 'no sandbox named: use the host <port>-<sandboxID>.<domain> or the E2b-Sandbox-Id and E2b-Sandbox-Port headers');

/**
 * Entry points of the data-plane listeners. The hot path (a fresh cache hit on a running
 * sandbox) does no I/O before forwarding: scan headers, check the token, forward.
 */
export class DataPlane {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly cache: BackendCache,
    private readonly proto: 'http' | 'https',
  ) {}

  readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const scan = scanRequestHeaders(req.rawHeaders);
    const target = targetOf(scan);
    if (target === null) {
      if (SignedFileUrls.matches(req.url)) this.forwardSignedFileUrl(req, res, scan);
      else sendProxyError(res, NO_TARGET);
      return;
    }
    const route = this.hotRoute(target, scan, req);
    if (route instanceof SvcError) { this.reject(target, route); sendProxyError(res, route); return; }
    addForwardedHeaders(scan, req.socket.remoteAddress, this.proto);
    new HttpExchange(this.ctx, req, res, scan, target).start(route);
  };

  /** A signed `/files` URL that names no sandbox: the signature says whose it is (401 when nobody's). */
  private forwardSignedFileUrl(req: IncomingMessage, res: ServerResponse, scan: ScannedRequest): void {
    this.ctx.signedFiles.sandboxOf(req.method ?? 'GET', req.url!).then((sandboxId) => {
      if (res.destroyed) return;
      const target = { sandboxId, port: 0 };
      addForwardedHeaders(scan, req.socket.remoteAddress, this.proto);
      // The cold path checks the signature against that sandbox again, expiry included.
      new HttpExchange(this.ctx, req, res, scan, target).start(undefined);
    }, (err: unknown) => sendProxyError(res, err instanceof SvcError ? err : new SvcError(503, 'sandbox routing failed')));
  }

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const scan = scanRequestHeaders(req.rawHeaders);
    const target = targetOf(scan);
    if (target === null) { sendProxyErrorOnSocket(socket, NO_TARGET); return; }
    const route = this.hotRoute(target, scan, req);
    if (route instanceof SvcError) { this.reject(target, route); sendProxyErrorOnSocket(socket, route); return; }
    addForwardedHeaders(scan, req.socket.remoteAddress, this.proto);
    new UpgradeExchange(this.ctx, req, socket, head, scan, target).start(route);
  };

  private reject(target: Target, refusal: SvcError): void {
    this.ctx.logger.debug({ sandboxId: target.sandboxId, port: target.port, status: refusal.status }, 'request refused by the access check');
  }

  /** A fresh running route from the cache; the refusal when its access check fails; undefined: cold path. */
  private hotRoute(target: Target, scan: ScannedRequest, req: IncomingMessage): SandboxRoute | SvcError | undefined {
    const route = this.cache.fresh(target.sandboxId);
    if (route === undefined || route.state !== 'running') return undefined;
    return accessRefusal(route, target.port, presentedAccess(scan, req)) ?? route;
  }
}

function targetOf(scan: ScannedRequest): Target | null {
  if (scan.sandboxIdHeader !== undefined) return targetFromHeaders(scan.sandboxIdHeader, scan.sandboxPortHeader);
  return targetFromHost(scan.host);
}
