import type { AddressInfo, Socket } from 'node:net';
import type { Logger, WorkerEntry } from '@svc/common';
import type { PlatformAddresses, SandboxEgressPolicy } from '@svc/contracts/egress';
import { AuditLog } from './audit-log.ts';
import { liveSecretsOf } from './audit-sink.ts';
import { Bootstrap } from './bootstrap.ts';
import { EgressCa } from './certificates.ts';
import { createEgressAdminApp } from './admin-server.ts';
import { dataPathSettingsOf, startEgressDataPath, type DataPathSettings } from './data-path.ts';
import { startEgressWorkers } from './egress-workers.ts';
import type { Destination } from './original-destination.ts';
import { PlaceholderResolver, placeholderSourcesOf, type PlaceholderSource, type PlaceholderSources } from './placeholders.ts';
import { platformSourceOf } from './platform-guard.ts';
import { PolicyStore } from './policy-store.ts';
import type { PolicyChange } from './policy-sync.ts';
import type { EgressWorkerStats } from './worker-protocol.ts';

export interface EgressProxyOptions extends DataPathSettings {
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
  /**
   * The master where `${e2b.secrets.…}` and `${e2b.identity.tokens.…}` are resolved, and where the
   * platform guard reads the platform's addresses; absent (and no `placeholders`): a request that
   * needs a placeholder is refused, and the guard refuses only what needs no master.
   */
  placeholderSource?: PlaceholderSource;
  /** Resolvers given as objects (tests' fakes), in-process only; they win over placeholderSource. */
  placeholders?: PlaceholderSources;
  /** The platform's addresses as a function (tests), in-process only; it wins over placeholderSource's master. */
  platformSource?: () => Promise<PlatformAddresses>;
  /** Every policy of this node (the master's list), retried with backoff until it answers; absent: ready at once. */
  policySource?: () => Promise<SandboxEgressPolicy[]>;
  /** Where a connection went before DNAT, for TLS without SNI; default: the conntrack table. In-process only. */
  originalDestination?: (socket: Socket) => Promise<Destination | undefined>;
  /**
   * Run the data path in this many worker processes behind the same listeners (docs/egress.md
   * "Worker processes"); this process keeps the admin API, the policies and the audit file.
   * Absent: everything in this process.
   */
  workers?: { count: number; entry: WorkerEntry };
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
  /** The authoritative policies. With workers, change them through the admin API: only its changes reach the workers. */
  store: PolicyStore;
  /** The worker processes' pids; absent in-process. */
  pids?: () => number[];
  /** Every worker's stats (tests, diagnostics); absent in-process. */
  workerStats?: () => Promise<EgressWorkerStats[]>;
  close(): Promise<void>;
}

/** Where the data path runs: in this process, or in workers that every policy change must reach. */
interface Backend {
  httpPort: number;
  httpsPort: number;
  tunnelPort: number;
  onChange?: (change: PolicyChange) => Promise<void>;
  pids?: () => number[];
  stats?: () => Promise<EgressWorkerStats[]>;
  close(): Promise<void>;
}

/** Starts the egress proxy: HTTP and HTTPS listeners for sandboxes, the admin API, the policy bootstrap. */
export async function startEgressProxy(opts: EgressProxyOptions): Promise<EgressProxy> {
  const { logger } = opts;
  if (opts.workers && (opts.placeholders || opts.originalDestination || opts.platformSource)) {
    throw new Error('egress proxy: `placeholders`, `originalDestination` and `platformSource` are objects of this process and cannot reach worker processes; give `placeholderSource` instead');
  }
  // Before any worker is forked: workers load the CA, they never make one.
  const ca = await EgressCa.loadOrCreate(opts.caDir);
  const store = new PolicyStore();
  const sources = opts.placeholders ?? (opts.placeholderSource && placeholderSourcesOf(opts.placeholderSource));
  // With workers, the placeholders are resolved (and their lines redacted) in the workers.
  const placeholders = opts.workers ? undefined : new PlaceholderResolver(sources);
  const audit = await AuditLog.open(opts.auditLogPath, {
    logger, secretsFor: liveSecretsOf(store, placeholders), maxBytes: opts.auditMaxBytes, keep: opts.auditKeep,
  });

  let backend: Backend;
  try {
    backend = opts.workers
      ? await startEgressWorkers({ ...opts.workers, settings: dataPathSettingsOf(opts), caDir: opts.caDir, placeholderSource: opts.placeholderSource, store, audit, logger })
      : await startEgressDataPath(opts, {
        ca, store, placeholders: placeholders!, audit, logger, originalDestination: opts.originalDestination,
        platformSource: opts.platformSource ?? platformSourceOf(opts.placeholderSource),
      });
  } catch (err) {
    await audit.close();
    throw err;
  }
  const onChange = backend.onChange?.bind(backend);
  const bootstrap = new Bootstrap(store, logger, opts.policySource, onChange);
  const admin = createEgressAdminApp({ logger, https: opts.adminHttps, adminToken: opts.adminToken, store, tasks: () => bootstrap.stats(), ready: () => bootstrap.ready(), onChange });
  try {
    await admin.listen({ host: opts.adminBind, port: opts.adminPort });
  } catch (err) {
    await Promise.all([admin.close(), backend.close()]).catch((e: unknown) => logger.warn({ err: e }, 'egress proxy: closing after a failed start failed'));
    await audit.close();
    throw err;
  }
  const adminPort = (admin.server.address() as AddressInfo).port;
  bootstrap.start();
  const { httpPort, httpsPort, tunnelPort } = backend;
  logger.info({
    bind: opts.bind, httpPort, httpsPort, tunnelPort, adminPort, auditLog: opts.auditLogPath, workers: opts.workers?.count ?? 0,
    upstreamProxy: opts.upstreamProxy ? `${opts.upstreamProxy.kind}://${opts.upstreamProxy.host}:${opts.upstreamProxy.port}` : undefined,
  }, 'egress proxy listening');

  let closing: Promise<void> | undefined;
  return {
    httpPort,
    httpsPort,
    tunnelPort,
    adminPort,
    caPem: ca.caPem,
    ready: () => bootstrap.ready(),
    store,
    ...(backend.pids ? { pids: backend.pids } : {}),
    ...(backend.stats ? { workerStats: backend.stats } : {}),
    close: () => closing ??= (async () => {
      bootstrap.stop();
      await Promise.all([admin.close(), backend.close()]);
      await audit.close();
    })(),
  };
}
