import { PlaceholderResolver, type PlaceholderSources } from './placeholders.ts';
import http from 'node:http';
import type { AddressInfo, Server, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { clientErrorAnswer, writeErrorOnSocket, type Logger, type TaskStats } from '@svc/common';
import { EGRESS_DEFAULTS, EgressRuleError, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { AuditLog, auditTimestamp } from './audit-log.ts';
import { EgressCa } from './certificates.ts';
import { plainIpv4 } from './ipv4.ts';
import { LeafContexts } from './leaf-contexts.ts';
import { conntrackOriginalDestination, type Destination } from './original-destination.ts';
import { checkPolicy } from './policy-check.ts';
import { PolicyStore } from './policy-store.ts';
import { handleEgressRequest } from './proxy.ts';
import type { ConnectionFacts, ProxyDeps } from './proxy-deps.ts';
import { handleEgressUpgrade } from './upgrade-exchange.ts';
import { handleEgressConnect } from './connect-exchange.ts';
import { registerEgressMetrics } from './egress-metrics.ts';
import { createTlsListener } from './tls-listener.ts';
import { createEgressAdminApp } from './admin-server.ts';
import { systemCaBundle, Upstreams } from './upstream.ts';
import { viaOfTunnel, type ProxyVia } from './proxy-via.ts';
import { createTcpTunnelServer } from './tcp-tunnel.ts';

export interface EgressProxyOptions {
  /** The sandbox-facing address of both listeners. */
  bind: string;
  /** 8080 in production; 0 for an ephemeral port. */
  httpPort: number;
  /** 8443 in production; 0 for an ephemeral port. */
  httpsPort: number;
  /** 8088 in production (egress.tunnel_port); 0 for an ephemeral port; undefined: no tunnel listener. */
  tunnelPort?: number;
  /** egress.upstream_proxy: every sandbox's upstream connections go through it unless its own egressProxy is set. */
  upstreamProxy?: ProxyVia;
  adminBind: string;
  /** 9091 in production; 0 for an ephemeral port. */
  adminPort: number;
  /** '' turns the admin policy routes off (503); health still answers. */
  adminToken: string;
  /** cluster_tls: the admin listener serves HTTPS. */
  adminHttps?: { key: Buffer; cert: Buffer };
  /** Holds ca.pem and ca-key.pem (made when missing). */
  caDir: string;
  auditLogPath: string;
  /** The audit log rotates before it would pass this many bytes; 0 or absent: never by size (it still rotates daily). */
  auditMaxBytes?: number;
  /** Rotated audit files kept; default 5. */
  auditKeep?: number;
  /** host → IPv4, consulted before DNS. */
  resolve?: Record<string, string>;
  /** PEM trusted for upstream TLS besides node's and the system's roots. */
  upstreamCa?: string;
  /** Where `${e2b.secrets.…}` and `${e2b.identity.tokens.…}` are resolved; absent: a request that needs one is refused. */
  placeholders?: PlaceholderSources;
  /** Every policy of this node (the master's list), retried with backoff until it answers; absent: ready at once. */
  policySource?: () => Promise<SandboxEgressPolicy[]>;
  connectTimeoutMs?: number;
  ioTimeoutMs?: number;
  /** Where a connection went before DNAT, for TLS without SNI; default: the conntrack table. */
  originalDestination?: (socket: Socket) => Promise<Destination | undefined>;
  logger: Logger;
}

export interface EgressProxy {
  httpPort: number;
  httpsPort: number;
  /** 0 when there is no tunnel listener. */
  tunnelPort: number;
  adminPort: number;
  /** The root CA that templates bake in. */
  caPem: string;
  ready(): boolean;
  store: PolicyStore;
  close(): Promise<void>;
}

/** Idle time between requests on a sandbox's keep-alive connection. */
const CLIENT_KEEPALIVE_MS = 60_000;
const CLIENT_HEADERS_TIMEOUT_MS = 60_000;
const SANDBOX_TIMEOUT_MARGIN_MS = 5_000;
const BOOTSTRAP_FIRST_RETRY_MS = 250;
const BOOTSTRAP_MAX_RETRY_MS = 15_000;

/** Starts the egress proxy: HTTP and HTTPS listeners for sandboxes, the admin API, the policy bootstrap. */
export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  const { logger } = opts;
  const ioTimeoutMs = opts.ioTimeoutMs ?? EGRESS_DEFAULTS.ioTimeoutMs;
  const ca = await EgressCa.loadOrCreate(opts.caDir);
  const store = new PolicyStore();
  const placeholders = new PlaceholderResolver(opts.placeholders);
  const audit = await AuditLog.open(opts.auditLogPath, {
    logger, liveSecrets: () => [...store.liveSecrets(), ...placeholders.liveValues()], maxBytes: opts.auditMaxBytes, keep: opts.auditKeep,
  });
  const upstreams = new Upstreams({
    resolve: opts.resolve,
    upstreamCa: opts.upstreamCa,
    systemCa: await systemCaBundle(),
    connectTimeoutMs: opts.connectTimeoutMs ?? EGRESS_DEFAULTS.connectTimeoutMs,
    ioTimeoutMs,
  });
  registerEgressMetrics();
  // A sandbox's own SOCKS5 proxy wins over the operator's; either way nothing of it goes direct.
  const viaFor = (sandboxIp: string): ProxyVia | undefined => {
    const tunnel = store.forAddress(sandboxIp)?.tunnel;
    return tunnel ? viaOfTunnel(tunnel) : opts.upstreamProxy;
  };
  const deps: ProxyDeps = { store, placeholders, audit, upstreams, logger, viaFor };
  const originalDestination = opts.originalDestination ?? ((socket: Socket) => conntrackOriginalDestination(socket, logger));
  const tunnelServer = opts.tunnelPort === undefined ? undefined : createTcpTunnelServer({
    store, audit, logger, originalDestination, viaFor, ioTimeoutMs, dial: (target, via) => upstreams.dial(target, via),
  });
  const connections = new WeakMap<Socket, ConnectionFacts>();

  // Upgraded and CONNECT sockets, which node's servers no longer track, so that close() ends them.
  const tunnels = new Set<Duplex>();
  const httpServer = createHttpServer(ioTimeoutMs, deps, tunnels, (socket) => {
    let conn = connections.get(socket);
    if (!conn) {
      conn = { scheme: 'http', sandboxIp: plainIpv4(socket.remoteAddress), tlsVersion: '', cipher: '' };
      connections.set(socket, conn);
    }
    return conn;
  });
  // Serves the connections the TLS listener hands over; it never listens itself.
  const httpsServer = createHttpServer(ioTimeoutMs, deps, tunnels, (socket) => connections.get(socket));
  // node starts its connection tracking on 'listening': without it headersTimeout is not
  // enforced and closeAllConnections reaches nothing on a server that never listens.
  httpsServer.emit('listening');
  const tlsListener = createTlsListener({
    leaves: new LeafContexts(ca),
    originalDestination,
    onSecure: (socket: TLSSocket, t) => {
      connections.set(socket, { scheme: 'https', sandboxIp: t.sandboxIp, sni: t.sni, certName: t.certName, tlsVersion: t.tlsVersion, cipher: t.cipher });
      httpsServer.emit('connection', socket);
    },
    onHandshakeFailure: (f) => {
      const policy = store.forAddress(f.sandboxIp);
      audit.write({ type: 'tls_handshake', ts: auditTimestamp(), sandbox_ip: f.sandboxIp, ...(policy ? { sandbox_id: policy.sandboxId } : {}), sni: f.sni, reason: f.reason });
    },
  });

  const bootstrap = new Bootstrap(store, logger, opts.policySource);
  const admin = createEgressAdminApp({ logger, https: opts.adminHttps, adminToken: opts.adminToken, store, tasks: () => bootstrap.stats() });

  const started: Array<{ close(): Promise<unknown> }> = [];
  try {
    const httpPort = await listen(httpServer, opts.httpPort, opts.bind);
    started.push({ close: () => closeServer(httpServer) });
    const httpsPort = await listen(tlsListener.server, opts.httpsPort, opts.bind);
    started.push({ close: () => closeServer(tlsListener.server) });
    let tunnelPort = 0;
    if (tunnelServer) {
      tunnelPort = await listen(tunnelServer.server, opts.tunnelPort ?? 0, opts.bind);
      started.push({ close: () => closeServer(tunnelServer.server) });
    }
    await admin.listen({ host: opts.adminBind, port: opts.adminPort });
    started.push(admin);
    const adminPort = (admin.server.address() as AddressInfo).port;
    bootstrap.start();
    logger.info({ bind: opts.bind, httpPort, httpsPort, tunnelPort, adminPort, auditLog: opts.auditLogPath, upstreamProxy: opts.upstreamProxy ? `${opts.upstreamProxy.kind}://${opts.upstreamProxy.host}:${opts.upstreamProxy.port}` : undefined }, 'egress proxy listening');

    let closing: Promise<void> | undefined;
    return {
      httpPort,
      httpsPort,
      tunnelPort,
      adminPort,
      caPem: ca.caPem,
      ready: () => store.ready,
      store,
      close: () => closing ??= (async () => {
        bootstrap.stop();
        const closed = Promise.all(started.map((s) => s.close()));
        tlsListener.destroyAll();
        tunnelServer?.destroyAll();
        httpServer.closeAllConnections();
        for (const socket of tunnels) socket.destroy();
        // It never listened, so close() only stops the connection tracking (and reports ERR_SERVER_NOT_RUNNING).
        httpsServer.close(() => { /* nothing was listening; the tracking stopped, which is all close() is for here */ });
        httpsServer.closeAllConnections();
        await closed;
        upstreams.close();
        await audit.close();
      })(),
    };
  } catch (err) {
    await Promise.all(started.map((s) => s.close().catch((e: unknown) => logger.warn({ err: e }, 'egress proxy: closing a listener after a failed start failed'))));
    tlsListener.destroyAll();
    httpsServer.close(() => { /* never listened: this only stops its connection tracking */ });
    upstreams.close();
    await audit.close();
    throw err;
  }
}

/** The facts of a connection a listener accepted (its sandbox, its TLS); undefined: none, the connection is dropped. */
type FactsOf = (socket: Socket) => ConnectionFacts | undefined;

function createHttpServer(ioTimeoutMs: number, deps: ProxyDeps, tunnels: Set<Duplex>, factsOf: FactsOf): http.Server {
  const server = http.createServer({
    keepAliveTimeout: CLIENT_KEEPALIVE_MS,
    headersTimeout: CLIENT_HEADERS_TIMEOUT_MS,
    // Streams last as long as the upstream keeps them busy; the idle timeout below bounds them.
    requestTimeout: 0,
  }, (req, res) => {
    const conn = factsOf(req.socket);
    if (!conn) { req.socket.destroy(); return; }
    handleEgressRequest(deps, conn, req, res);
  });
  // Later than the upstream's idle timeout, so that a silent upstream gets its 504 to the sandbox first.
  server.timeout = ioTimeoutMs + SANDBOX_TIMEOUT_MARGIN_MS;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) { socket.destroy(); return; }
    writeErrorOnSocket(socket, clientErrorAnswer(err));
  });
  // WebSocket upgrades and CONNECT (docs/egress.md "WebSocket and CONNECT"): node hands the socket
  // over, and it is the exchange's from here.
  const tunnel = (handle: typeof handleEgressUpgrade) => (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const conn = factsOf(req.socket);
    if (!conn) { socket.destroy(); return; }
    tunnels.add(socket);
    socket.once('close', () => tunnels.delete(socket));
    handle(deps, conn, req, socket, head);
  };
  server.on('upgrade', tunnel(handleEgressUpgrade));
  server.on('connect', tunnel(handleEgressConnect));
  return server;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * The first load of every policy from the master. Until it succeeds the proxy refuses all
 * traffic; it is retried with a doubling delay and counted for the health answer.
 */
class Bootstrap {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly task: TaskStats = { runs: 0, failures: 0, failingSince: null, lastFailure: null, lastFailureAt: null };

  constructor(private readonly store: PolicyStore, private readonly logger: Logger, private readonly source: (() => Promise<SandboxEgressPolicy[]>) | undefined) {}

  start(): void {
    if (!this.source) { this.store.markReady(); return; }
    void this.attempt(BOOTSTRAP_FIRST_RETRY_MS);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  stats(): Record<string, TaskStats> {
    return this.source ? { 'policy-bootstrap': { ...this.task } } : {};
  }

  private async attempt(nextDelayMs: number): Promise<void> {
    if (this.stopped || !this.source) return;
    this.task.runs++;
    this.store.beginBootstrap();
    try {
      const list = await this.source();
      if (this.stopped) return;
      const policies = this.checked(list);
      this.store.replaceAll(policies);
      this.task.failingSince = null;
      this.logger.info({ policies: policies.length, attempts: this.task.runs }, 'egress policies loaded; the proxy is ready');
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      const now = new Date().toISOString();
      this.task.failures++;
      this.task.failingSince ??= now;
      this.task.lastFailure = message;
      this.task.lastFailureAt = now;
      this.logger.warn({ err: message, attempt: this.task.runs, retryInMs: nextDelayMs }, 'egress policies could not be loaded; every sandbox request is refused until they are');
      if (this.stopped) return;
      this.timer = setTimeout(() => void this.attempt(Math.min(nextDelayMs * 2, BOOTSTRAP_MAX_RETRY_MS)), nextDelayMs);
      this.timer.unref();
    }
  }

  /** A policy that fails the checks is left out (its sandbox is refused) rather than failing them all. */
  private checked(list: unknown): SandboxEgressPolicy[] {
    if (!Array.isArray(list)) throw new Error('the policy source answered something other than a list');
    const out: SandboxEgressPolicy[] = [];
    for (const raw of list) {
      try {
        out.push(checkPolicy(raw));
      } catch (err) {
        if (!(err instanceof EgressRuleError)) throw err;
        const id = (raw as { sandboxId?: unknown })?.sandboxId;
        this.logger.error({ sandboxId: id, err: err.message }, 'egress policy from the master fails the checks; its sandbox is refused all egress');
      }
    }
    return out;
  }
}
