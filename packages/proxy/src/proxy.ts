import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { clientErrorAnswer, clusterTlsOf, internalScheme, Periodic, randomId, type Coordination, type Logger, type SvcConfig } from '@svc/common';
import { sendProxyErrorOnSocket } from './error-response.ts';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';
import type { MasterInternalClient } from '@svc/contracts/master-internal';
import { ActivityTracker } from './activity-tracker.ts';
import { createAdminApp } from './admin-server.ts';
import { Announcer } from './announcer.ts';
import { AutoResumer } from './auto-resumer.ts';
import { BackendCache } from './backend-cache.ts';
import { DataPlane } from './data-plane.ts';
import type { ProxyContext } from './proxy-context.ts';
import { RouteGate, masterRouteLookup } from './route-gate.ts';
import { SignedFileUrls } from './signed-file-urls.ts';
import { UpstreamPool } from './upstream-pool.ts';
import { registerProxyMetrics } from './proxy-metrics.ts';

export interface ProxyTuning {
  /** How long a running route is served from the cache without asking the master. */
  routeCacheTtlMs: number;
  routeLookupTimeoutMs: number;
  activityFlushMs: number;
  announceIntervalMs: number;
  /** Longest a request waits for a pausing/resuming sandbox to settle. */
  settleWaitMs: number;
  settlePollMs: number;
  /** Longest a request waits for an auto-resume. */
  resumeTimeoutMs: number;
  connectTimeoutMs: number;
  /** Idle keep-alive connections to sandboxes are closed after this. */
  idleBackendSocketMs: number;
}

export const DEFAULT_PROXY_TUNING: ProxyTuning = {
  routeCacheTtlMs: 2_000,
  routeLookupTimeoutMs: 5_000,
  activityFlushMs: 1_000,
  announceIntervalMs: 3_000,
  settleWaitMs: 15_000,
  settlePollMs: 100,
  resumeTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  idleBackendSocketMs: 4_000,
};

export interface ProxyDeps {
  logger: Logger;
  master: MasterInternalClient;
  /** Base URLs of the lifecycle replicas (auto-resume, announcements). */
  lifecycleUrls: string[];
  coordination: Coordination;
  /** How lifecycle replicas reach this proxy's admin API; default from proxy.bind and the admin port. */
  adminAdvertiseUrl?: string;
  /** Certificate and key for the HTTPS listener; the configuration has no field for them (yet). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  tuning?: Partial<ProxyTuning>;
}

export interface RunningProxy {
  proxyId: string;
  httpUrl: string;
  /** Set when the HTTPS listener runs. */
  httpsUrl?: string;
  adminUrl: string;
  close(): Promise<void>;
}

export async function startProxy(cfg: Pick<SvcConfig, 'proxy'> & { cluster_tls?: SvcConfig['cluster_tls'] }, deps: ProxyDeps): Promise<RunningProxy> {
  const tuning = { ...DEFAULT_PROXY_TUNING, ...deps.tuning };
  const logger = deps.logger;
  const proxyId = `proxy-${hostname()}-${randomId(6)}`;
  const bind = cfg.proxy.bind || '127.0.0.1';

  registerProxyMetrics(logger);
  const pool = new UpstreamPool(tuning.idleBackendSocketMs);
  const cache = new BackendCache(
    masterRouteLookup(deps.master, logger, tuning.routeLookupTimeoutMs),
    tuning.routeCacheTtlMs,
    (route) => pool.dropIdle(route.address),
  );
  const periodic = new Periodic(logger);
  const activity = new ActivityTracker(deps.master, tuning.activityFlushMs, periodic);
  const resumer = new AutoResumer(deps.lifecycleUrls, tuning.resumeTimeoutMs, logger);
  const ctx: ProxyContext = {
    gate: new RouteGate(cache, resumer, { settleWaitMs: tuning.settleWaitMs, settlePollMs: tuning.settlePollMs }),
    pool,
    activity,
    logger,
    connectTimeoutMs: tuning.connectTimeoutMs,
    upgradedSockets: new Set(),
    signedFiles: new SignedFileUrls((req) => deps.master.routeBySignature(req, tuning.routeLookupTimeoutMs), (route) => cache.set(route)),
    purgeRoute: (id) => { cache.purge([id]); },
  };

  // A new sandbox's route is fetched as soon as it is announced: the SDK's first request follows
  // the create's answer within milliseconds, and would otherwise wait for the look-up itself.
  // Other changes reach the cache one way only, the master's purge through the admin API
  // (docs/design.md, "Events and caches").
  const unsubscribe = deps.coordination.subscribe(SANDBOX_EVENTS_TOPIC, (e) => {
    const ev = e as Partial<SandboxEvent>;
    if (typeof ev.sandboxId !== 'string' || ev.kind !== 'sandbox.created') return;
    const sandboxId = ev.sandboxId;
    cache.load(sandboxId).catch((err: Error) => logger.debug({ sandboxId, err: err.message }, 'route prefetch of a new sandbox failed; its first request looks it up'));
  });

  const servers: Server[] = [];
  const http = dataPlaneServer(createHttpServer({ noDelay: true, requestTimeout: 0 }), new DataPlane(ctx, cache, 'http'), logger);
  servers.push(http);
  const httpAddr = await listen(http, cfg.proxy.http_port, bind);

  let httpsUrl: string | undefined;
  if (cfg.proxy.https_port > 0) {
    const tls = deps.tls ?? (cfg.proxy.tls_cert_file && cfg.proxy.tls_key_file
      ? { cert: readFileSync(cfg.proxy.tls_cert_file), key: readFileSync(cfg.proxy.tls_key_file) }
      : undefined);
    if (tls) {
      const https = dataPlaneServer(createHttpsServer({ ...tls, noDelay: true, requestTimeout: 0 }), new DataPlane(ctx, cache, 'https'), logger);
      servers.push(https);
      httpsUrl = `https://${clientHost(bind)}:${(await listen(https, cfg.proxy.https_port, bind)).port}`;
    } else {
      logger.warn({ https_port: cfg.proxy.https_port }, 'proxy.https_port is set but no certificate and key were given (proxy.tls_cert_file, proxy.tls_key_file); HTTPS listener not started');
    }
  }

  let announcer: Announcer | undefined;
  const admin = createAdminApp(logger, {
    https: clusterTlsOf(cfg),
    proxyId,
    adminToken: cfg.proxy.admin_token,
    heartbeatLastPushedMs: () => announcer?.lastPushedMs ?? 0,
    cachedBackends: () => cache.size,
    tasks: () => periodic.stats(),
    purge: (ids) => cache.purge(ids),
  });
  await admin.listen({ port: cfg.proxy.admin_port, host: bind });
  const adminPort = (admin.server.address() as AddressInfo).port;
  const adminUrl = `${internalScheme(cfg)}://${clientHost(bind)}:${adminPort}`;

  announcer = new Announcer(deps.lifecycleUrls, { proxyId, adminUrl: deps.adminAdvertiseUrl ?? adminUrl }, tuning.announceIntervalMs, periodic, logger);

  const httpUrl = `http://${clientHost(bind)}:${httpAddr.port}`;
  logger.info({ proxyId, httpUrl, httpsUrl, adminUrl }, 'data-plane proxy listening');

  return {
    proxyId,
    httpUrl,
    httpsUrl,
    adminUrl,
    async close() {
      unsubscribe();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
        for (const sock of ctx.upgradedSockets) sock.destroy();
      })));
      await admin.close();
      await periodic.stop();
      // The last traffic still resets idle clocks; a failure now is the master going away with us.
      await activity.flush().catch((err: Error) => logger.warn({ err: err.message }, 'last activity report failed'));
      cache.close();
      pool.closeAll();
    },
  };
}

function dataPlaneServer<S extends Server>(server: S, dp: DataPlane, logger: Logger): S {
  server.on('request', dp.onRequest);
  server.on('upgrade', dp.onUpgrade);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code !== 'ECONNRESET') logger.debug({ code: err.code }, 'malformed client request');
    if (!socket.writable) { socket.destroy(); return; }
    // The same uniform JSON body as every other answer of the proxy (docs/design.md, "Errors").
    sendProxyErrorOnSocket(socket, clientErrorAnswer(err));
  });
  return server;
}

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

function clientHost(bind: string): string {
  if (bind === '0.0.0.0' || bind === '::' || bind === '') return '127.0.0.1';
  return bind.includes(':') ? `[${bind}]` : bind;
}
