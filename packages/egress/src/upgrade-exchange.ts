import http, { type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { InvalidHeaderError, requestHead, type ServerRequest } from '@svc/http1';
import { sandboxResponseHeaders, upstreamRequestHeaders } from './headers.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { requestTarget, type RequestTarget } from './request-target.ts';
import { SocketExchange } from './tunnel-exchange.ts';
import { ioTimeout } from './tunnel-upstream.ts';
import { UpstreamError, type UpstreamTarget } from './upstream.ts';

/**
 * A request with "Connection: upgrade" (WebSocket, docs/egress.md "WebSocket and CONNECT"),
 * which the lean server hands over as a socket: decided, guarded and injected exactly as any
 * request, sent to the upstream with the same headers, and on a 101 the two sockets spliced;
 * any other answer is relayed as an ordinary response and the connection closed.
 */
export function handleEgressUpgrade(deps: ProxyDeps, conn: ConnectionFacts, req: ServerRequest, socket: Socket, head: Buffer): void {
  const exchange = new UpgradeExchange(deps, conn, req, socket, head);
  exchange.serve().catch((err: unknown) => exchange.internalError(err));
}

class UpgradeExchange extends SocketExchange {
  private readonly method: string;

  constructor(deps: ProxyDeps, conn: ConnectionFacts, private readonly req: ServerRequest, sandbox: Socket, head: Buffer) {
    const method = req.method.toUpperCase();
    super(deps, conn, sandbox, head, method, req.url);
    this.method = method;
  }

  async serve(): Promise<void> {
    const target = requestTarget(this.conn.scheme, this.req.url, this.req.header('host'));
    if (typeof target === 'string') return this.answer(400, target);
    // WebSocket only: past the switch the bytes go unread, and another protocol carries requests
    // there that the rules never see (an h2c upstream serves any HTTP/2 stream, any path or method).
    const protocol = this.req.header('upgrade');
    if (!isWebSocket(protocol)) {
      return this.answer(400, `the egress proxy forwards only WebSocket upgrades (Upgrade: websocket), not Upgrade: ${JSON.stringify(protocol ?? '')}: past another protocol's switch (h2c, say) it could not apply the rules to the requests that follow; send them as HTTP/1.1 requests`);
    }
    // Its body would have to be framed towards the upstream before the switch; WebSocket has none.
    // A 400, not a 501: docs/design.md "Errors" keeps the other 5xx for the platform's own faults.
    if (this.req.hasBody) {
      return this.answer(400, `a protocol upgrade (${this.req.header('upgrade')}) with a request body is not supported by the egress proxy; send the body after the upgrade, or without Upgrade`);
    }
    const verdict = await this.gate.decide({ scheme: this.conn.scheme, port: target.port, host: target.host, method: this.method, path: target.path, ...(this.conn.sni ? { sni: this.conn.sni } : {}) });
    if (!verdict.allowed) return this.answer(verdict.status, verdict.message);
    const upstream: UpstreamTarget = { scheme: this.conn.scheme, host: target.host, ip: verdict.ip, port: target.port };
    // The same headers as a pooled request, with the two hop-by-hop ones an upgrade is made of.
    const headers = [...upstreamRequestHeaders(this.req.rawHeaders, verdict.inject, target.hostHeader), 'Connection', 'Upgrade', 'Upgrade', protocol];
    try {
      // The pooled path's checks (forward-exchange.ts), before any connection: the same 502, not node's throw.
      requestHead(this.method, target.path, headers);
    } catch (err) {
      if (!(err instanceof InvalidHeaderError)) throw err;
      return this.answer(502, `egress proxy cannot send the request to ${upstream.host}: ${err.message}`);
    }
    const socket = await this.open(upstream, this.conn.scheme === 'https');
    if (socket) this.request(socket, upstream, target, headers);
  }

  /** Sends the request head on the upstream connection, with node's client parsing the answer. */
  private request(socket: Socket, upstream: UpstreamTarget, target: RequestTarget, headers: string[]): void {
    const record = this.gate.record;
    const up = http.request({
      createConnection: () => socket,
      method: this.method,
      path: target.path,
      headers: headers as unknown as OutgoingHttpHeaders,
      setHost: false,
    });
    const { ioTimeoutMs } = this.deps.upstreams.tunnelSettings();
    const waiting = setTimeout(() => up.destroy(ioTimeout(upstream, ioTimeoutMs)), ioTimeoutMs).unref();
    up.on('upgrade', (res: IncomingMessage, upSocket: Socket, upHead: Buffer) => {
      clearTimeout(waiting);
      record.upstream_status = String(res.statusCode ?? '');
      if (this.left) { upSocket.destroy(); return; }
      // The upstream's switch must be to what was asked: a switch to h2c would leave unread bytes
      // carrying requests no rule decided, as a sandbox's h2c upgrade would.
      const switched = res.headers.upgrade;
      if (switched !== undefined && !isWebSocket(switched)) {
        upSocket.destroy();
        socket.destroy();
        this.fail(new UpstreamError(502, 'connection', `upstream ${upstream.host} switched to ${JSON.stringify(switched)}, not the WebSocket the egress proxy asked for; nothing was relayed`), upstream);
        return;
      }
      this.status = 101;
      const protocol = switched ?? String(this.req.header('upgrade'));
      this.sandbox.write(responseHead(res, ['Connection', 'Upgrade', 'Upgrade', protocol]));
      this.relay(upSocket, upHead);
    });
    up.on('response', (res: IncomingMessage) => {
      clearTimeout(waiting);
      record.upstream_status = String(res.statusCode ?? '');
      if (this.left) { res.destroy(); socket.destroy(); return; }
      this.relayResponse(res, socket, ioTimeoutMs);
    });
    up.on('error', (err) => {
      clearTimeout(waiting);
      socket.destroy();
      if (this.status === undefined) this.fail(err, upstream);
      else this.sandbox.destroy(); // mid-way through a relayed answer: cut short, as for requests
    });
    up.end();
  }

  /** The upstream declined the upgrade: its answer goes to the sandbox as an ordinary response, then both close. */
  private relayResponse(res: IncomingMessage, socket: Socket, ioTimeoutMs: number): void {
    const record = this.gate.record;
    this.status = res.statusCode ?? 502;
    this.closeAfter();
    // Without a length the body ends where the connection does (Transfer-Encoding is the proxy's to set, and it sets none).
    this.sandbox.write(responseHead(res, ['Connection', 'close']));
    const idle = setTimeout(() => { res.destroy(); this.sandbox.destroy(); }, ioTimeoutMs).unref();
    res.on('data', (chunk: Buffer) => { record.bytes_out += chunk.length; idle.refresh(); });
    res.on('error', (err) => this.deps.logger.debug({ err: err.message, host: record.host }, 'egress upgrade: the upstream answer failed'));
    res.once('close', () => {
      clearTimeout(idle);
      socket.destroy();
      if (!res.complete) this.sandbox.destroy();
    });
    res.pipe(this.sandbox);
  }
}

/** Whether an Upgrade header names WebSocket, the one protocol the proxy switches to (RFC 6455 4.1: case-insensitive). */
function isWebSocket(upgrade: string | undefined): upgrade is string {
  return upgrade !== undefined && upgrade.trim().toLowerCase() === 'websocket';
}

/** The status line and headers of an upstream answer as the sandbox gets them: hop-by-hop ones dropped, `extra` added. */
function responseHead(res: IncomingMessage, extra: string[]): string {
  const raw = [...sandboxResponseHeaders(res.rawHeaders), ...extra];
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  for (let i = 0; i < raw.length; i += 2) head += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return `${head}\r\n`;
}
