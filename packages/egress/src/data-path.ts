import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { listenShared, SvcError, writeErrorOnSocket, type Logger } from '@svc/common';
import { LeanServer, type RequestParseError, type ServerRequest } from '@svc/http1';
import { EGRESS_DEFAULTS, type PlatformAddresses } from '@svc/contracts/egress';
import { auditTimestamp } from './audit-log.ts';
import { AuditRateLimit } from './audit-rate-limit.ts';
import type { AuditSink } from './audit-sink.ts';
import type { EgressCa } from './certificates.ts';
import { handleEgressConnect } from './connect-exchange.ts';
import { registerEgressMetrics } from './egress-metrics.ts';
import { plainIpv4 } from './ipv4.ts';
import { LeafContexts } from './leaf-contexts.ts';
import { conntrackOriginalDestination, type Destination } from './original-destination.ts';
import type { PlaceholderResolver } from './placeholders.ts';
import type { PolicyStore } from './policy-store.ts';
import { PlatformGuard, type PlatformGuardSettings } from './platform-guard.ts';
import { handleEgressRequest } from './proxy.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { viaOfTunnel, type ProxyVia } from './proxy-via.ts';
import { SandboxConnections } from './sandbox-connections.ts';
import { createTcpTunnelServer } from './tcp-tunnel.ts';
import { createTlsListener } from './tls-listener.ts';
import { handleEgressUpgrade } from './upgrade-exchange.ts';
import { systemCaBundle, Upstreams } from './upstream.ts';

/** The data path's settings: plain data, the same in-process and in a worker's start message. */
export interface DataPathSettings {
  /** The sandbox-facing address of both listeners. */
  bind: string;
  /** 8080 in production; 0 for an ephemeral port. */
  httpPort: number;
  /** 8443 in production; 0 for an ephemeral port. */
  httpsPort: number;
  /** 8181 in production (egress.tunnel_port); 0 for an ephemeral port; undefined: no tunnel listener. */
  tunnelPort?: number;
  /** egress.upstream_proxy: every sandbox's upstream connections go through it unless its own egressProxy is set. */
  upstreamProxy?: ProxyVia;
  /** host → IPv4, consulted before DNS. */
  resolve?: Record<string, string>;
  /** PEM trusted for upstream TLS besides node's and the system's roots. */
  upstreamCa?: string;
  connectTimeoutMs?: number;
  ioTimeoutMs?: number;
  /** What the proxy never connects to for a sandbox (platform-guard.ts); absent: no such refusal (tests on loopback). */
  platformGuard?: PlatformGuardSettings;
}

/** What the data path works with besides its settings: in-process the proxy's own, in a worker the replicas. */
export interface DataPathDeps {
  ca: EgressCa;
  store: PolicyStore;
  placeholders: PlaceholderResolver;
  audit: AuditSink;
  logger: Logger;
  /** Where a connection went before DNAT, for TLS without SNI; default: the conntrack table. */
  originalDestination?: (socket: Socket) => Promise<Destination | undefined>;
  /** The master's list of the platform's addresses, for platformGuard; absent: the refusals that need no master only. */
  platformSource?: () => Promise<PlatformAddresses>;
}

export interface DataPath {
  httpPort: number;
  httpsPort: number;
  /** 0 when there is no tunnel listener. */
  tunnelPort: number;
  /** Connections accepted so far, over every listener (a worker's share, in its stats). */
  connections(): number;
  /** Stops the listeners and ends every connection (the audit sink is the caller's). */
  close(): Promise<void>;
}

/** Idle time between requests on a sandbox's keep-alive connection. */
const CLIENT_KEEPALIVE_MS = 60_000;
const CLIENT_HEADERS_TIMEOUT_MS = 60_000;
const SANDBOX_TIMEOUT_MARGIN_MS = 5_000;

/** The settings out of a larger options object: what a worker's start message carries. */
export function dataPathSettingsOf(o: DataPathSettings): DataPathSettings {
  const { bind, httpPort, httpsPort, tunnelPort, upstreamProxy, resolve, upstreamCa, connectTimeoutMs, ioTimeoutMs, platformGuard } = o;
  return { bind, httpPort, httpsPort, tunnelPort, upstreamProxy, resolve, upstreamCa, connectTimeoutMs, ioTimeoutMs, platformGuard };
}

/**
 * The listeners sandboxes talk to (HTTP, HTTPS through the TLS listener, the tunnel listener)
 * and everything behind them. The one way the data path is built: in the proxy's own process,
 * or in each worker process (worker.ts), where the ports are shared by every worker.
 */
export async function startEgressDataPath(s: DataPathSettings, d: DataPathDeps): Promise<DataPath> {
  const { logger, store } = d;
  // Each sandbox's records at a bounded rate, the excess counted (audit-rate-limit.ts): one
  // sandbox's flood would otherwise rotate every other sandbox's history out of the file.
  const audit = new AuditRateLimit(d.audit, logger);
  const ioTimeoutMs = s.ioTimeoutMs ?? EGRESS_DEFAULTS.ioTimeoutMs;
  const platform = s.platformGuard && new PlatformGuard(s.platformGuard, d.platformSource, logger);
  await platform?.start();
  const upstreams = new Upstreams({
    resolve: s.resolve,
    upstreamCa: s.upstreamCa,
    systemCa: await systemCaBundle(),
    connectTimeoutMs: s.connectTimeoutMs ?? EGRESS_DEFAULTS.connectTimeoutMs,
    ioTimeoutMs,
    ...(platform ? { platform } : {}),
  });
  registerEgressMetrics();
  // A sandbox's own SOCKS5 proxy wins over the operator's; either way nothing of it goes direct.
  const viaFor = (sandboxIp: string): ProxyVia | undefined => {
    const tunnel = store.forAddress(sandboxIp)?.tunnel;
    return tunnel ? viaOfTunnel(tunnel) : s.upstreamProxy;
  };
  const deps: ProxyDeps = { store, placeholders: d.placeholders, audit, upstreams, logger, viaFor, ...(platform ? { platform } : {}) };
  const originalDestination = d.originalDestination ?? ((socket: Socket) => conntrackOriginalDestination(socket, logger));
  const tunnelServer = s.tunnelPort === undefined ? undefined : createTcpTunnelServer({
    store, audit, logger, originalDestination, viaFor, ioTimeoutMs, dial: (target, via) => upstreams.dial(target, via), ...(platform ? { platform } : {}),
  });
  const connections = new WeakMap<Socket, ConnectionFacts>();

  // Every sandbox's connections (HTTP, HTTPS once secure, and the upgraded and CONNECT sockets,
  // which the lean servers no longer track), so that a change of its policy and close() end them.
  const clients = new SandboxConnections();
  const stopWatching = store.onChange((addresses) => {
    for (const address of addresses) {
      const closed = clients.closeFor(address) + (tunnelServer?.closeFor(address) ?? 0);
      if (closed) logger.info({ sandboxIp: address, closed, pid: process.pid }, 'egress: the sandbox\'s policy changed or went; its open connections were closed, to be decided again by the new policy');
    }
  });
  const httpServer = createTcpServer({ noDelay: true });
  httpServer.on('connection', (socket: Socket) => clients.add(plainIpv4(socket.remoteAddress), socket));
  const httpLean = leanServer(ioTimeoutMs, deps, clients, (socket) => {
    let conn = connections.get(socket);
    if (!conn) {
      conn = { scheme: 'http', sandboxIp: plainIpv4(socket.remoteAddress), tlsVersion: '', cipher: '' };
      connections.set(socket, conn);
    }
    return conn;
  });
  httpLean.attach(httpServer, 'connection');
  // Serves the connections the TLS listener hands over.
  const httpsLean = leanServer(ioTimeoutMs, deps, clients, (socket) => connections.get(socket));
  const tlsListener = createTlsListener({
    leaves: new LeafContexts(d.ca),
    originalDestination,
    onSecure: (socket: TLSSocket, t) => {
      connections.set(socket, { scheme: 'https', sandboxIp: t.sandboxIp, sni: t.sni, certName: t.certName, tlsVersion: t.tlsVersion, cipher: t.cipher });
      clients.add(t.sandboxIp, socket);
      httpsLean.serve(socket);
    },
    onHandshakeFailure: (f) => {
      const policy = store.forAddress(f.sandboxIp);
      audit.write({ type: 'tls_handshake', ts: auditTimestamp(), sandbox_ip: f.sandboxIp, ...(policy ? { sandbox_id: policy.sandboxId } : {}), sni: f.sni, reason: f.reason });
    },
  });
  let accepted = 0;
  for (const server of [httpServer, tlsListener.server, tunnelServer?.server]) server?.on('connection', () => { accepted++; });

  const listening: Server[] = [];
  const stopTracking = () => {
    httpLean.closeAll();
    httpsLean.closeAll();
  };
  try {
    // Always in this order: in worker processes the cluster module shares the n-th listen of a port among them.
    const httpPort = await listen(httpServer, s.httpPort, s.bind, listening);
    const httpsPort = await listen(tlsListener.server, s.httpsPort, s.bind, listening);
    const tunnelPort = tunnelServer ? await listen(tunnelServer.server, s.tunnelPort ?? 0, s.bind, listening) : 0;
    let closing: Promise<void> | undefined;
    return {
      httpPort,
      httpsPort,
      tunnelPort,
      connections: () => accepted,
      close: () => closing ??= (async () => {
        const closed = Promise.all(listening.map(closeServer));
        tlsListener.destroyAll();
        tunnelServer?.destroyAll();
        stopWatching();
        clients.destroyAll();
        stopTracking();
        await closed;
        upstreams.close();
        platform?.stop();
        // After the connections' own records: the counts of what was dropped go last.
        audit.close();
      })(),
    };
  } catch (err) {
    await Promise.all(listening.map(closeServer));
    tlsListener.destroyAll();
    stopWatching();
    stopTracking();
    upstreams.close();
    platform?.stop();
    audit.close();
    throw err;
  }
}

/** The facts of a connection a listener accepted (its sandbox, its TLS); undefined: none, the connection is dropped. */
type FactsOf = (socket: Socket) => ConnectionFacts | undefined;

/**
 * The lean HTTP/1.1 server (@svc/http1) for one listener's connections. Streams last as long as
 * the upstream keeps them busy: a request's connection closes only after the upstream's idle
 * timeout and a margin, so that a silent upstream gets its 504 to the sandbox first.
 */
function leanServer(ioTimeoutMs: number, deps: ProxyDeps, clients: SandboxConnections, factsOf: FactsOf): LeanServer {
  return new LeanServer({
    onRequest: (req, reply) => {
      const conn = factsOf(req.socket);
      if (!conn) { req.socket.destroy(); return; }
      handleEgressRequest(deps, conn, req, reply);
    },
    // WebSocket upgrades and CONNECT (docs/egress.md "WebSocket and CONNECT"): the socket is the
    // exchange's from here.
    onUpgrade: (req: ServerRequest, socket: Socket, head: Buffer) => {
      const conn = factsOf(req.socket);
      if (!conn) { socket.destroy(); return; }
      clients.add(conn.sandboxIp, socket);
      if (req.method === 'CONNECT') handleEgressConnect(deps, conn, req, socket, head);
      else handleEgressUpgrade(deps, conn, req, socket, head);
    },
    onClientError: (err: RequestParseError, socket: Socket) => {
      deps.logger.debug({ status: err.status, reason: err.message }, 'malformed request from a sandbox');
      writeErrorOnSocket(socket, new SvcError(err.status, err.message));
    },
    onInternalError: (err: unknown) => {
      deps.logger.error({ err: err instanceof Error ? err.stack : String(err) }, 'the egress proxy failed on a request; its connection was closed');
    },
  }, { keepAliveTimeoutMs: CLIENT_KEEPALIVE_MS, headersTimeoutMs: CLIENT_HEADERS_TIMEOUT_MS, requestIdleTimeoutMs: ioTimeoutMs + SANDBOX_TIMEOUT_MARGIN_MS });
}

/**
 * Listens (in a worker, on the socket the pool's primary holds: a replaced worker's port stays
 * open), and records the server in `listening` for the close.
 */
async function listen(server: Server, port: number, host: string, listening: Server[]): Promise<number> {
  const { port: bound } = await listenShared(server, port, host);
  listening.push(server);
  return bound;
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
