import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { clusterTlsOf, internalScheme, Periodic, randomId, systemAccount, type Coordination, type Logger, type SvcConfig, type SystemAccount, type WorkerEntry } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';
import type { MasterInternalClient } from '@svc/contracts/master-internal';
import { createAdminApp } from './admin-server.ts';
import { Announcer } from './announcer.ts';
import { startDataPath } from './data-path.ts';
import { localPlane, type Plane } from './plane.ts';
import { DEFAULT_PROXY_TUNING, type ProxyTuning } from './proxy-tuning.ts';
import { startWorkerPlane } from './worker-plane.ts';
import type { ProxyWorkerStats } from './worker-protocol.ts';

export { DEFAULT_PROXY_TUNING, type ProxyTuning } from './proxy-tuning.ts';

export interface ProxyDeps {
  logger: Logger;
  /** The master's internal API; in worker mode each worker makes its own client for its base URL. */
  master: MasterInternalClient;
  /** Base URLs of the lifecycle replicas (auto-resume, announcements). */
  lifecycleUrls: string[];
  /** cluster_token: the master and the lifecycle replicas take it on every route (docs/cluster.md). */
  clusterToken?: string;
  coordination: Coordination;
  /** How lifecycle replicas reach this proxy's admin API; default from proxy.bind and the admin port. */
  adminAdvertiseUrl?: string;
  /** Certificate and key for the HTTPS listener; the configuration has no field for them (yet). */
  tls?: { cert: string | Buffer; key: string | Buffer };
  tuning?: Partial<ProxyTuning>;
  /**
   * The data path in `count` worker processes behind the same listeners (docs/data-plane.md,
   * "Worker processes"), forked from `entry`; this process keeps the admin API. Absent: all here.
   */
  workers?: { count: number; entry: WorkerEntry };
}

export interface RunningProxy {
  proxyId: string;
  httpUrl: string;
  /** Set when the HTTPS listener runs. */
  httpsUrl?: string;
  adminUrl: string;
  close(): Promise<void>;
  /** Worker mode: the workers' process ids (tests, benchmarks). */
  pids?: () => number[];
  /** Worker mode: each live worker's cached routes, requests answered and tasks. */
  workerStats?: () => Promise<ProxyWorkerStats[]>;
}

type ProxyConfig = Pick<SvcConfig, 'proxy'> & { cluster_tls?: SvcConfig['cluster_tls'] };

export async function startProxy(cfg: ProxyConfig, deps: ProxyDeps): Promise<RunningProxy> {
  const tuning = { ...DEFAULT_PROXY_TUNING, ...deps.tuning };
  const logger = deps.logger;
  const proxyId = `proxy-${hostname()}-${randomId(6)}`;
  const bind = cfg.proxy.bind || '127.0.0.1';
  const tls = listenerTls(cfg, deps, logger);

  const plane = deps.workers
    ? await startWorkerPlane({
      count: deps.workers.count,
      entry: deps.workers.entry,
      // Sandboxes' boots must not starve the previews users load (docs/benchmarks.md, "The data plane during a burst of creates").
      priority: cfg.proxy.worker_priority,
      logger,
      init: {
        httpPort: cfg.proxy.http_port, httpsPort: cfg.proxy.https_port, bind,
        tls: tls && { cert: tls.cert.toString(), key: tls.key.toString() },
        masterUrl: deps.master.baseUrl, lifecycleUrls: deps.lifecycleUrls, clusterToken: deps.clusterToken, tuning,
        ...workerAccount(cfg.proxy.worker_user),
      },
    })
    : localPlane(await startDataPath({
      httpPort: cfg.proxy.http_port, httpsPort: cfg.proxy.https_port, bind, tls,
      master: deps.master, lifecycleUrls: deps.lifecycleUrls, clusterToken: deps.clusterToken, tuning, logger,
    }));

  let control: Awaited<ReturnType<typeof startControl>>;
  try {
    control = await startControl(cfg, deps, { proxyId, bind, tuning, plane });
  } catch (err) {
    // The admin port could not be bound: the data path goes too, the caller learns why.
    await plane.close();
    throw err;
  }

  const httpUrl = `http://${clientHost(bind)}:${plane.httpPort}`;
  const httpsUrl = plane.httpsPort === undefined ? undefined : `https://${clientHost(bind)}:${plane.httpsPort}`;
  logger.info({ proxyId, httpUrl, httpsUrl, adminUrl: control.adminUrl, workers: deps.workers?.count }, 'data-plane proxy listening');

  return {
    proxyId,
    httpUrl,
    httpsUrl,
    adminUrl: control.adminUrl,
    async close() {
      await control.close();
      await plane.close();
    },
    ...(plane.pids && { pids: () => plane.pids!() }),
    ...(plane.workerStats && { workerStats: () => plane.workerStats!() }),
  };
}

/**
 * The parts of one proxy that are not the data path: the admin API, the announcements to the
 * lifecycle replicas, and the new sandboxes' route prefetch.
 */
async function startControl(cfg: ProxyConfig, deps: ProxyDeps, o: { proxyId: string; bind: string; tuning: ProxyTuning; plane: Plane }) {
  const { logger } = deps;
  const { plane } = o;
  const periodic = new Periodic(logger);

  // A new sandbox's route is fetched as soon as it is announced: the SDK's first request follows
  // the create's answer within milliseconds, and would otherwise wait for the look-up itself.
  // Other changes reach the cache one way only, the master's purge through the admin API
  // (docs/design.md, "Events and caches").
  const unsubscribe = deps.coordination.subscribe(SANDBOX_EVENTS_TOPIC, (e) => {
    const ev = e as Partial<SandboxEvent>;
    if (typeof ev.sandboxId !== 'string' || ev.kind !== 'sandbox.created') return;
    plane.prefetch(ev.sandboxId);
  });

  // The health answer's two halves come from one round of the workers.
  let pending: ReturnType<Plane['stats']> | undefined;
  const planeStats = () => (pending ??= plane.stats().finally(() => { pending = undefined; }));

  let announcer: Announcer | undefined;
  const admin = createAdminApp(logger, {
    https: clusterTlsOf(cfg),
    proxyId: o.proxyId,
    adminToken: cfg.proxy.admin_token,
    heartbeatLastPushedMs: () => announcer?.lastPushedMs ?? 0,
    cachedBackends: async () => (await planeStats()).cachedBackends,
    tasks: async () => ({ ...(await planeStats()).tasks, ...periodic.stats() }),
    purge: (ids) => plane.purge(ids),
  });
  try {
    await admin.listen({ port: cfg.proxy.admin_port, host: o.bind });
  } catch (err) {
    unsubscribe();
    throw err;
  }
  const adminUrl = `${internalScheme(cfg)}://${clientHost(o.bind)}:${(admin.server.address() as AddressInfo).port}`;
  announcer = new Announcer(deps.lifecycleUrls, deps.clusterToken, { proxyId: o.proxyId, adminUrl: deps.adminAdvertiseUrl ?? adminUrl }, o.tuning.announceIntervalMs, periodic, logger);

  return {
    adminUrl,
    async close() {
      unsubscribe();
      await admin.close();
      await periodic.stop();
    },
  };
}

/** The HTTPS listener's certificate and key, when it is to run (https_port > 0 and both given). */
function listenerTls(cfg: ProxyConfig, deps: ProxyDeps, logger: Logger): { cert: string | Buffer; key: string | Buffer } | undefined {
  if (cfg.proxy.https_port <= 0) return undefined;
  const tls = deps.tls ?? (cfg.proxy.tls_cert_file && cfg.proxy.tls_key_file
    ? { cert: readFileSync(cfg.proxy.tls_cert_file), key: readFileSync(cfg.proxy.tls_key_file) }
    : undefined);
  if (!tls) logger.warn({ https_port: cfg.proxy.https_port }, 'proxy.https_port is set but no certificate and key were given (proxy.tls_cert_file, proxy.tls_key_file); HTTPS listener not started');
  return tls;
}

/**
 * The account the workers become once they listen (docs/security.md, "The data-plane proxy's
 * workers"): none when this process is not root (nothing to give up) or the setting is empty.
 * An account the host does not have stops the start, naming the setting.
 */
function workerAccount(user: string | undefined): { runAs?: SystemAccount } {
  if (!user || user === 'root' || process.getuid?.() !== 0) return {};
  try {
    return { runAs: systemAccount(user) };
  } catch (err) {
    throw new Error(`proxy.worker_user: ${(err as Error).message}; name an unprivileged account of this host, or set it to '' to keep the workers root`);
  }
}

function clientHost(bind: string): string {
  if (bind === '0.0.0.0' || bind === '::' || bind === '') return '127.0.0.1';
  return bind.includes(':') ? `[${bind}]` : bind;
}
