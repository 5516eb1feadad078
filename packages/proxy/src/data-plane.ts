import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/master/internal-api';
import type { BackendCache } from './backend-cache.ts';
import { sendProxyError, sendProxyErrorOnSocket } from './error-response.ts';
import { addForwardedHeaders, scanRequestHeaders, type ScannedRequest } from './headers.ts';
import { HttpExchange } from './http-exchange.ts';
import type { ProxyContext } from './proxy-context.ts';
import { trafficTokenRejected } from './route-gate.ts';
import { targetFromHeaders, targetFromHost, type Target } from './target.ts';
import { trafficTokenAccepted, trafficTokenApplies } from './traffic-token.ts';
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
    if (target === null) { sendProxyError(res, NO_TARGET); return; }
    const route = this.hotRoute(target, scan);
    if (route === false) { this.reject(target, scan); sendProxyError(res, trafficTokenRejected()); return; }
    addForwardedHeaders(scan, req.socket.remoteAddress, this.proto);
    new HttpExchange(this.ctx, req, res, scan, target).start(route);
  };

  readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const scan = scanRequestHeaders(req.rawHeaders);
    const target = targetOf(scan);
    if (target === null) { sendProxyErrorOnSocket(socket, NO_TARGET); return; }
    const route = this.hotRoute(target, scan);
    if (route === false) { this.reject(target, scan); sendProxyErrorOnSocket(socket, trafficTokenRejected()); return; }
    addForwardedHeaders(scan, req.socket.remoteAddress, this.proto);
    new UpgradeExchange(this.ctx, req, socket, head, scan, target).start(route);
  };

  private reject(target: Target, scan: ScannedRequest): void {
    this.ctx.logger.debug({ sandboxId: target.sandboxId, presented: scan.trafficTokens?.length ?? 0 }, 'traffic token rejected');
  }

  /** A fresh running route from the cache; false when its token check fails; undefined: cold path. */
  private hotRoute(target: Target, scan: ScannedRequest): SandboxRoute | false | undefined {
    const route = this.cache.fresh(target.sandboxId);
    if (route === undefined || route.state !== 'running') return undefined;
    if (!trafficTokenApplies(route, target.port)) return route;
    return trafficTokenAccepted(route.trafficAccessToken, scan.trafficTokens) ? route : false;
  }
}

function targetOf(scan: ScannedRequest): Target | null {
  if (scan.sandboxIdHeader !== undefined) return targetFromHeaders(scan.sandboxIdHeader, scan.sandboxPortHeader);
  return targetFromHost(scan.host);
}
