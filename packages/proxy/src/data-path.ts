/**
 * The data path of the proxy: the data-plane listeners and everything a request needs on its way
 * to a sandbox (route cache, upstream pool, gate, activity report). One function builds it, for
 * the proxy's own process (in-process) and for each worker process alike (docs/data-plane.md,
 * "Worker processes"); the control parts (admin API, announcements, events) stay with the caller.
 */
import { createServer as createTcpServer, type Server } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { listenShared, Periodic, type Logger, type TaskStats } from '@svc/common';
import type { MasterInternalClient } from '@svc/contracts/master-internal';
import { ActivityTracker } from './activity-tracker.ts';
import { AutoResumer } from './auto-resumer.ts';
import { BackendCache } from './backend-cache.ts';
import { DataPlane } from './data-plane.ts';
import type { ProxyContext } from './proxy-context.ts';
import type { ProxyTuning } from './proxy-tuning.ts';
import { registerProxyMetrics } from './proxy-metrics.ts';
import { masterRouteLookup, RouteGate } from './route-gate.ts';
import { SignedFileUrls } from './signed-file-urls.ts';
import { LeanServer, UpstreamPool } from '@svc/http1';

export interface DataPathOptions {
  /** Ports of the listeners (0: ephemeral); https is started only with `tls`. */
  httpPort: number;
  httpsPort: number;
  bind: string;
  tls?: { cert: string | Buffer; key: string | Buffer };
  master: MasterInternalClient;
  /** Base URLs of the lifecycle replicas (auto-resume). */
  lifecycleUrls: string[];
  /** cluster_token, for the lifecycle replicas (the master client carries its own). */
  clusterToken?: string;
  tuning: ProxyTuning;
  logger: Logger;
}

export interface DataPath {
  /** The ports the listeners got. */
  httpPort: number;
  httpsPort?: number;
  /** Forgets the given sandboxes' routes, or every route; answers how many were cached. */
  purge(sandboxIds: string[] | undefined): number;
  /** Looks a new sandbox's route up ahead of its first request; a failure is logged, not thrown. */
  prefetch(sandboxId: string): void;
  cachedBackends(): number;
  /** The data path's own background tasks (the activity report). */
  tasks(): Record<string, TaskStats>;
  /** Stops the listeners, then reports the last activity. */
  close(): Promise<void>;
}

/**
 * Idle backend connections a worker keeps: per sandbox port (the pool key, address:port), per
 * sandbox (its address) and in all, the total's evictions falling on the sandbox holding the
 * most (http1 UpstreamPool groupOf), as the egress proxy's are (egress upstream.ts). Without
 * the last two a node's idle sockets grew with sandboxes x ports x 128 for idleBackendSocketMs.
 * A backend connection is a local TCP connect into the sandbox's namespace (no TLS), so one
 * closed past a cap costs little when it is needed again.
 */
export const MAX_IDLE_BACKEND_SOCKETS = { perPort: 128, perSandbox: 256, perWorker: 2_048 };
/** The sandbox a pool key (address:port) names: its address. */
const sandboxOfKey = (key: string): string => key.slice(0, key.lastIndexOf(':'));

export async function startDataPath(o: DataPathOptions): Promise<DataPath> {
  const { tuning, logger, master } = o;
  registerProxyMetrics(logger);
  const pool = new UpstreamPool({
    idleMs: tuning.idleBackendSocketMs, ioTimeoutMs: tuning.requestIdleTimeoutMs,
    maxIdlePerKey: MAX_IDLE_BACKEND_SOCKETS.perPort, maxIdleTotal: MAX_IDLE_BACKEND_SOCKETS.perWorker,
    groupOf: sandboxOfKey, maxIdlePerGroup: MAX_IDLE_BACKEND_SOCKETS.perSandbox,
  });
  const cache = new BackendCache(
    masterRouteLookup(master, logger, tuning.routeLookupTimeoutMs),
    tuning.routeCacheTtlMs,
    (route) => pool.dropIdle((key) => sandboxOfKey(key) === route.address),
  );
  const periodic = new Periodic(logger);
  const activity = new ActivityTracker(master, tuning.activityFlushMs, periodic);
  const resumer = new AutoResumer(o.lifecycleUrls, o.clusterToken, tuning.resumeTimeoutMs, logger);
  const ctx: ProxyContext = {
    gate: new RouteGate(cache, resumer, { settleWaitMs: tuning.settleWaitMs, settlePollMs: tuning.settlePollMs }),
    pool,
    activity,
    logger,
    connectTimeoutMs: tuning.connectTimeoutMs,
    requestIdleTimeoutMs: tuning.requestIdleTimeoutMs,
    tunnelIdleTimeoutMs: tuning.tunnelIdleTimeoutMs,
    upgradedSockets: new Set(),
    signedFiles: new SignedFileUrls((req) => master.routeBySignature(req, tuning.routeLookupTimeoutMs), cache),
    purgeRoute: (id) => { cache.purge([id]); },
  };

  const servers: Server[] = [];
  const lean: LeanServer[] = [];
  const stopped = async () => {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
      s.close(() => resolve());
      for (const l of lean) l.closeAll();
      for (const sock of ctx.upgradedSockets) sock.destroy();
    })));
    await periodic.stop();
    // The last traffic still resets idle clocks; a failure now is the master going away with us.
    await activity.flush().catch((err: Error) => logger.warn({ err: err.message }, 'last activity report failed'));
    cache.close();
    pool.closeAll();
  };

  try {
    const http = createTcpServer({ noDelay: true });
    lean.push(dataPlaneServer(http, 'connection', new DataPlane(ctx, cache, 'http'), tuning));
    servers.push(http);
    // In a worker, on the socket the pool's primary holds: a replaced worker's port stays open.
    const httpPort = (await listenShared(http, o.httpPort, o.bind)).port;
    let httpsPort: number | undefined;
    if (o.tls && o.httpsPort > 0) {
      const https = createTlsServer({ ...o.tls, noDelay: true });
      // A client that fails its handshake has nothing to be answered (node's https server is as quiet).
      https.on('tlsClientError', (err: NodeJS.ErrnoException) => logger.debug({ code: err.code }, 'TLS handshake with a client failed'));
      lean.push(dataPlaneServer(https, 'secureConnection', new DataPlane(ctx, cache, 'https'), tuning));
      servers.push(https);
      httpsPort = (await listenShared(https, o.httpsPort, o.bind)).port;
    }
    return {
      httpPort,
      httpsPort,
      purge: (ids) => cache.purge(ids),
      prefetch: (sandboxId) => {
        cache.load(sandboxId, true).catch((err: Error) => logger.debug({ sandboxId, err: err.message }, 'route prefetch of a new sandbox failed; its first request looks it up'));
      },
      cachedBackends: () => cache.size,
      tasks: () => periodic.stats(),
      close: stopped,
    };
  } catch (err) {
    // A listener that could not bind: what started is stopped, the caller learns why.
    await stopped();
    throw err;
  }
}

/**
 * Past the upstream's idle limit, the client's: the sandbox's silence is answered (504) before
 * the client's connection is given up on.
 */
const CLIENT_IDLE_MARGIN_MS = 5_000;

/**
 * The lean HTTP/1.1 server on a listener, with the tuning's client timeouts; a request's own
 * duration is not limited (uploads, streams), only its silence both ways.
 */
function dataPlaneServer(server: Server, event: 'connection' | 'secureConnection', dp: DataPlane, tuning: ProxyTuning): LeanServer {
  const lean = new LeanServer(dp, {
    keepAliveTimeoutMs: tuning.clientKeepAliveMs,
    headersTimeoutMs: tuning.clientHeadersTimeoutMs,
    requestIdleTimeoutMs: tuning.requestIdleTimeoutMs + CLIENT_IDLE_MARGIN_MS,
  });
  lean.attach(server, event);
  return lean;
}

