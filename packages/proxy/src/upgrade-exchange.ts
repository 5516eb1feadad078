import { connect, type Socket } from 'node:net';
import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import { ResponseParseError, type ServerRequest } from '@svc/http1';
import { maskedHost, requestLines, type ScannedRequest } from './headers.ts';
import { asSvcError, sendProxyErrorOnSocket } from './error-response.ts';
import { backendError } from './http-exchange.ts';
import { presentedAccess } from './access-check.ts';
import type { ProxyContext } from './proxy-context.ts';
import type { Target } from './target.ts';
import { UpgradeAnswer } from './upgrade-answer.ts';

/**
 * An Upgrade request (WebSocket): the request head goes to the sandbox over a fresh TCP
 * connection; after its 101, bytes are piped both ways until either side closes. Any other
 * answer is relayed and ends the client's connection (UpgradeAnswer).
 */
export class UpgradeExchange {
  private retried = false;
  private closed = false;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly req: ServerRequest,
    private readonly client: Socket,
    private readonly head: Buffer,
    private readonly scan: ScannedRequest,
    private readonly target: Target,
  ) {
    client.on('error', () => client.destroy());
    ctx.upgradedSockets.add(client);
    client.once('close', () => {
      this.closed = true;
      ctx.upgradedSockets.delete(client);
    });
  }

  start(route: SandboxRoute | undefined): void {
    if (route !== undefined) this.connect(route);
    else this.resolveThenConnect();
  }

  private resolveThenConnect(): void {
    this.ctx.gate.runningRoute(this.target.sandboxId, this.target.port, presentedAccess(this.scan, this.req, true)).then(
      (route) => { if (!this.closed) this.connect(route); },
      (err) => sendProxyErrorOnSocket(this.client, this.refused(err)),
    );
  }

  private refused(err: unknown) {
    const e = asSvcError(err);
    this.ctx.logger.debug({ sandboxId: this.target.sandboxId, status: e.status }, 'request answered by the proxy');
    return e;
  }

  private connect(route: SandboxRoute): void {
    const port = this.target.port || route.envdPort;
    const upstream = connect({ host: route.address, port, noDelay: true });
    const timer = setTimeout(() => upstream.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), this.ctx.connectTimeoutMs);
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      clearTimeout(timer);
      this.exchange(route, port, upstream);
    });
    // Once connected, the answer's reader or the tunnel handles the errors; this listener stays
    // so that a late one cannot crash the process.
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (!connected) this.onConnectError(err, route, port);
    });
  }

  private onConnectError(err: NodeJS.ErrnoException, route: SandboxRoute, port: number): void {
    if (this.closed) return;
    if (err.code === 'ECONNREFUSED' && !this.retried) {
      this.retried = true;
      this.ctx.purgeRoute(route.sandboxId);
      this.resolveThenConnect();
      return;
    }
    this.ctx.logger.warn({ sandboxId: route.sandboxId, port, code: err.code }, 'backend upgrade failed');
    sendProxyErrorOnSocket(this.client, backendError(err, route.sandboxId, port));
  }

  /** Sends the request head; the client's bytes wait for the sandbox's answer (UpgradeAnswer). */
  private exchange(route: SandboxRoute, port: number, upstream: Socket): void {
    if (this.closed) { upstream.destroy(); return; }
    const sandboxId = route.sandboxId;
    // Every byte either way is activity, the first being the sandbox's answer to the upgrade;
    // an open, silent WebSocket is idle, and so is one the proxy refused.
    upstream.on('data', () => this.ctx.activity.touch(sandboxId));
    this.client.once('close', () => upstream.destroy());
    upstream.write(this.requestHead(route, port));
    new UpgradeAnswer(this.req, this.client, upstream, this.ctx.requestIdleTimeoutMs, {
      switched: (bytes) => this.tunnel(sandboxId, upstream, bytes),
      failed: (err) => {
        this.ctx.logger.warn({ sandboxId, port, code: err.code, err: err.message }, 'backend upgrade failed');
        sendProxyErrorOnSocket(this.client, err instanceof ResponseParseError
          ? new SvcError(502, `sandbox ${sandboxId} sent an invalid answer to an upgrade`)
          : backendError(err, sandboxId, port));
      },
    });
  }

  /** The sandbox switched protocols: bytes flow both ways until either side closes, or neither sends for the tunnel's idle limit. */
  private tunnel(sandboxId: string, upstream: Socket, answer: Buffer): void {
    const client = this.client;
    client.write(answer);
    // What the client sent after its head belongs to the new protocol only now.
    if (this.head.length > 0) upstream.write(this.head);
    client.on('data', () => this.ctx.activity.touch(sandboxId));
    let ended = false;
    const close = () => {
      if (ended) return;
      ended = true;
      upstream.destroy();
      client.destroy();
    };
    upstream.on('error', close);
    upstream.once('close', close);
    client.once('close', close);
    // Each byte either way passes through the client's socket: its idle timer sees both directions.
    client.setTimeout(this.ctx.tunnelIdleTimeoutMs);
    client.once('timeout', () => {
      this.ctx.logger.debug({ sandboxId, idleMs: this.ctx.tunnelIdleTimeoutMs }, 'tunnel idle: closing both sides');
      close();
    });
    upstream.pipe(client);
    client.pipe(upstream);
  }

  private requestHead(route: SandboxRoute, port: number): string {
    const lines = requestLines(this.req.method, this.req.url, this.scan, `${route.address}:${port}`, maskedHost(route, port));
    return `${lines}Connection: Upgrade\r\nUpgrade: ${this.scan.upgrade ?? 'websocket'}\r\n\r\n`;
  }
}
