import type { Socket } from 'node:net';
import type { EgressScheme } from '@svc/contracts/egress';
import type { ServerRequest } from '@svc/http1';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { requestTarget } from './request-target.ts';
import { SocketExchange } from './tunnel-exchange.ts';
import type { UpstreamTarget } from './upstream.ts';

/**
 * `CONNECT host:port` (docs/egress.md "WebSocket and CONNECT"): from a client configured with
 * the proxy as an explicit one. Decided by the same rules as a request to that host and port;
 * when allowed, a TCP tunnel whose bytes the proxy does not read, so a rule that injects refuses it.
 */
export function handleEgressConnect(deps: ProxyDeps, conn: ConnectionFacts, req: ServerRequest, socket: Socket, head: Buffer): void {
  const exchange = new ConnectExchange(deps, conn, req.url, socket, head);
  exchange.serve().catch((err: unknown) => exchange.internalError(err));
}

class ConnectExchange extends SocketExchange {
  constructor(deps: ProxyDeps, conn: ConnectionFacts, private readonly authority: string, sandbox: Socket, head: Buffer) {
    super(deps, conn, sandbox, head, 'CONNECT', authority);
  }

  async serve(): Promise<void> {
    // RFC 9110 9.3.6: the target is host:port, the port required.
    const target = /:\d+$/.test(this.authority) ? requestTarget('https', '', this.authority) : 'CONNECT needs host:port';
    if (typeof target === 'string') return this.answer(400, `bad CONNECT target ${JSON.stringify(this.authority)}: ${target}`);
    // The tunnel's scheme is not known; the port stands for it, so that a rule without a port
    // covers 443 (and a plain-HTTP rule 80), as for the requests the node steers here.
    const scheme: EgressScheme = target.port === 80 ? 'http' : 'https';
    // opaque: the tunnel may carry any method and path, so deny rules hold whatever those name (decide.ts).
    const verdict = await this.gate.decide({ scheme, port: target.port, host: target.host, method: 'CONNECT', path: '', opaque: true }, true);
    if (!verdict.allowed) return this.answer(verdict.status, verdict.message);
    const upstream: UpstreamTarget = { scheme, host: target.host, ip: verdict.ip, port: target.port };
    const socket = await this.open(upstream, false);
    if (!socket) return;
    this.status = 200;
    this.sandbox.write('HTTP/1.1 200 Connection established\r\n\r\n');
    this.relay(socket, Buffer.alloc(0));
  }
}
