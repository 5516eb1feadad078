import { PlaceholderResolver, type PlaceholderSources } from './placeholders.ts';
import http from 'node:http';
import type { AddressInfo, Server, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { clientErrorAnswer, SvcError, writeErrorOnSocket, type Logger, type TaskStats } from '@svc/common';
import { EGRESS_DEFAULTS, EgressRuleError, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { AuditLog, auditTimestamp } from './audit-log.ts';
import { EgressCa } from './certificates.ts';
import { plainIpv4 } from './ipv4.ts';
import { LeafContexts } from './leaf-contexts.ts';
import { conntrackOriginalDestination, type Destination } from './original-destination.ts';
import { checkPolicy } from './policy-check.ts';
import { PolicyStore } from './policy-store.ts';
import { handleEgressRequest, type ConnectionFacts, type ProxyDeps } from './proxy.ts';
import { registerEgressMetrics } from './egress-metrics.ts';
import { createTlsListener } from './tls-listener.ts';
import { createEgressAdminApp } from './admin-server.ts';
import { systemCaBundle, Upstreams } from './upstream.ts';

export interface EgressProxyOptions {
  /** The sandbox-facing address of both listeners. */
  bind: string;
  /** 8080 in production; 0 for an ephemeral port. */
  httpPort: number;
  /** 8443 in production; 0 for an ephemeral port. */
  httpsPort: number;
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
  const audit = await AuditLog.open(opts.auditLogPath, { logger, liveSecrets: () => [...store.liveSecrets(), ...placeholders.liveValues()] });
  const upstreams = new Upstreams({
    resolve: opts.resolve,
    upstreamCa: opts.upstreamCa,
    systemCa: await systemCaBundle(),
    connectTimeoutMs: opts.connectTimeoutMs ?? EGRESS_DEFAULTS.connectTimeoutMs,
    ioTimeoutMs,
  });
  registerEgressMetrics();
  const deps: ProxyDeps = { store, placeholders, audit, upstreams, logger };
  const connections = new WeakMap<Socket, ConnectionFacts>();

  const httpServer = createHttpServer(ioTimeoutMs, (req, res) => {
    const socket = req.socket;
    let conn = connections.get(socket);
    if (!conn) {
      conn = { scheme: 'http', sandboxIp: plainIpv4(socket.remoteAddress), tlsVersion: '', cipher: '' };
      connections.set(socket, conn);
    }
    handleEgressRequest(deps, conn, req, res);
  });
  // Serves the connections the TLS listener hands over; it never listens itself.
  const httpsServer = createHttpServer(ioTimeoutMs, (req, res) => {
    const conn = connections.get(req.socket);
    if (!conn) { req.socket.destroy(); return; }
    handleEgressRequest(deps, conn, req, res);
  });
  // node starts its connection tracking on 'listening': without it headersTimeout is not
  // enforced and closeAllConnections reaches nothing on a server that never listens.
  httpsServer.emit('listening');
  const tlsListener = createTlsListener({
    leaves: new LeafContexts(ca),
    originalDestination: opts.originalDestination ?? ((socket) => conntrackOriginalDestination(socket, logger)),
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
    await admin.listen({ host: opts.adminBind, port: opts.adminPort });
    started.push(admin);
    const adminPort = (admin.server.address() as AddressInfo).port;
    bootstrap.start();
    logger.info({ bind: opts.bind, httpPort, httpsPort, adminPort, auditLog: opts.auditLogPath }, 'egress proxy listening');

    let closing: Promise<void> | undefined;
    return {
      httpPort,
      httpsPort,
      adminPort,
      caPem: ca.caPem,
      ready: () => store.ready,
      store,
      close: () => closing ??= (async () => {
        bootstrap.stop();
        const closed = Promise.all(started.map((s) => s.close()));
        tlsListener.destroyAll();
        httpServer.closeAllConnections();
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

function createHttpServer(ioTimeoutMs: number, onRequest: http.RequestListener): http.Server {
  const server = http.createServer({
    keepAliveTimeout: CLIENT_KEEPALIVE_MS,
    headersTimeout: CLIENT_HEADERS_TIMEOUT_MS,
    // Streams last as long as the upstream keeps them busy; the idle timeout below bounds them.
    requestTimeout: 0,
  }, onRequest);
  // Later than the upstream's idle timeout, so that a silent upstream gets its 504 to the sandbox first.
  server.timeout = ioTimeoutMs + SANDBOX_TIMEOUT_MARGIN_MS;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) { socket.destroy(); return; }
    writeErrorOnSocket(socket, clientErrorAnswer(err));
  });
  // Sandboxes reach the proxy through DNAT with ordinary requests; there is no tunnel to offer.
  server.on('connect', (_req, socket: Duplex) => {
    writeErrorOnSocket(socket, new SvcError(501, 'CONNECT is not supported: the egress proxy is transparent, send the request itself'));
  });
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
