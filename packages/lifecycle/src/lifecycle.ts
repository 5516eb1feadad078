import type { AddressInfo } from 'node:net';
import { Periodic, clusterTlsOf, createHttpApp, requireSharedToken, internalScheme, randomId, type Coordination, type Logger, type SvcConfig } from '@svc/common';
import { CLUSTER_TOKEN_HEADER, LIFECYCLE_OPEN_PATHS } from '@svc/contracts/cluster-token';
import type { MasterInternalClient } from '@svc/contracts/master-internal';
import { lifecycleReplicaListen } from '@svc/contracts/lifecycle';
import { consumeSandboxEvents } from './event-consumer.ts';
import { LeaderElection } from './leader-election.ts';
import { ProxyRegistry } from '@svc/contracts/proxy-registry';
import { ResumeCoordinator } from './resume-coordinator.ts';
import { registerRoutes } from './routes.ts';
import { Sweeper } from './sweeper.ts';

export interface LifecycleTuning {
  /** Longest POST /internal/resume takes before answering 503 (below the proxy's own wait). */
  resumeTimeoutMs: number;
  resumePollMs: number;
  /** TTL of per-sandbox locks (renewed while held); default: lifecycle.lease_ttl_ms. */
  lockTtlMs?: number;
  sweepConcurrency: number;
}

export const DEFAULT_LIFECYCLE_TUNING: LifecycleTuning = { resumeTimeoutMs: 25_000, resumePollMs: 100, sweepConcurrency: 4 };

export interface LifecycleDeps {
  logger: Logger;
  master: MasterInternalClient;
  coordination: Coordination;
  /** 0-based; replica i listens on lifecycle.listen's port + i. */
  replicaIndex: number;
  tuning?: Partial<LifecycleTuning>;
}

export interface RunningLifecycle {
  replicaId: string;
  url: string;
  isLeader(): boolean;
  close(): Promise<void>;
}

export async function startLifecycle(cfg: Pick<SvcConfig, 'lifecycle'> & { cluster_tls?: SvcConfig['cluster_tls']; cluster_token?: string }, deps: LifecycleDeps): Promise<RunningLifecycle> {
  const tuning = { ...DEFAULT_LIFECYCLE_TUNING, ...deps.tuning };
  const lc = cfg.lifecycle;
  const replicaId = `lifecycle-${deps.replicaIndex}-${randomId(6)}`;
  const logger = deps.logger.child({ replicaId });
  const lockTtlMs = tuning.lockTtlMs ?? lc.lease_ttl_ms;
  const startedAt = Date.now();
  const warmupMs = lc.warmup_sec * 1000;

  const election = new LeaderElection(deps.coordination, replicaId, lc.lease_ttl_ms, logger);
  // No pause or kill right after start or after taking over: idle clocks may not yet have
  // seen the activity that proxies are about to report.
  const warmingUp = () => {
    const now = Date.now();
    return now < startedAt + warmupMs || now < election.leaderSince() + warmupMs;
  };
  const registry = new ProxyRegistry(deps.coordination, replicaId, logger);
  const resumer = new ResumeCoordinator(deps.master, deps.coordination, replicaId,
    { timeoutMs: tuning.resumeTimeoutMs, pollMs: tuning.resumePollMs, lockTtlMs }, logger);
  const sweeper = new Sweeper({
    master: deps.master, coord: deps.coordination, replicaId, logger, lockTtlMs,
    concurrency: tuning.sweepConcurrency,
    mayAct: () => election.isLeader() && !warmingUp(),
  });
  const events = consumeSandboxEvents({ coord: deps.coordination, logger });

  const app = createHttpApp({ logger, https: clusterTlsOf(cfg) });
  const { host, port } = lifecycleReplicaListen(lc.listen, deps.replicaIndex);
  requireSharedToken(app, {
    token: cfg.cluster_token ?? '', header: CLUSTER_TOKEN_HEADER, setting: 'cluster_token', openPaths: LIFECYCLE_OPEN_PATHS, listen: `${host}:${port}`,
    exposure: 'resumes any paused sandbox and names where the master sends the proxy admin token',
  });
  const periodic = new Periodic(logger);
  registerRoutes(app, {
    health: () => ({
      ok: true, replicaId, leader: election.isLeader(), warmingUp: warmingUp(), createEventsApplied: events.created(), tasks: periodic.stats(),
    }),
    resume: (sandboxId) => resumer.resume(sandboxId),
    recordProxy: (a) => registry.record(a),
  });

  await app.listen({ host, port });
  const bound = (app.server.address() as AddressInfo).port;
  const url = `${internalScheme(cfg)}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${bound}`;

  election.start();
  periodic.every('idle sweep', lc.sweep_interval_ms, () => (election.isLeader() && !warmingUp() ? sweeper.sweepOnce() : undefined));
  logger.info({ url, warmupSec: lc.warmup_sec }, 'lifecycle manager listening');

  return {
    replicaId,
    url,
    isLeader: () => election.isLeader(),
    async close() {
      events.close();
      await app.close();
      await periodic.stop();
      await election.close();
    },
  };
}
