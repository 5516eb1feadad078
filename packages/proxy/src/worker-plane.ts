/**
 * The primary's side of the proxy in worker processes (docs/data-plane.md, "Worker processes"):
 * forks the workers, which build the data path themselves from a start message, and turns the
 * control parts' changes into calls every worker acknowledges before the change resolves.
 */
import { WorkerPool, type Logger, type TaskStats, type WorkerEntry } from '@svc/common';
import type { Plane } from './plane.ts';
import { PROXY_WORKER_ROLE, type ProxyWorkerCall, type ProxyWorkerInfo, type ProxyWorkerInit, type ProxyWorkerStats } from './worker-protocol.ts';

export interface WorkerPlaneOptions {
  count: number;
  entry: WorkerEntry;
  /** proxy.worker_priority. */
  priority: number;
  init: ProxyWorkerInit;
  logger: Logger;
}

export async function startWorkerPlane(o: WorkerPlaneOptions): Promise<Plane> {
  const pool = await WorkerPool.start<ProxyWorkerInit>({
    role: PROXY_WORKER_ROLE,
    count: Math.max(1, o.count),
    entry: o.entry,
    priority: o.priority,
    // The data path's state is its route cache, which a new worker starts empty: exact from the start.
    init: () => o.init,
    logger: o.logger,
  });
  const info = pool.info as ProxyWorkerInfo;
  const call = (c: ProxyWorkerCall) => pool.request(c);
  const workerStats = async () => (await call({ kind: 'stats' })) as ProxyWorkerStats[];
  return {
    httpPort: info.httpPort,
    httpsPort: info.httpsPort,
    // Resolves once every worker forgot them (a worker that died meanwhile is replaced by one with an empty cache).
    purge: async (sandboxIds) => ((await call({ kind: 'purge', sandboxIds })) as number[]).reduce((a, b) => a + b, 0),
    prefetch: (sandboxId) => {
      pool.broadcast({ kind: 'load', sandboxId } satisfies ProxyWorkerCall).catch((err: Error) => o.logger.warn({ sandboxId, err: err.message }, 'the route prefetch of a new sandbox did not reach every proxy worker; its first request looks it up'));
    },
    stats: async () => {
      const all = await workerStats();
      return { cachedBackends: all.reduce((n, s) => n + s.cachedBackends, 0), tasks: mergeTasks(all.map((s) => s.tasks)) };
    },
    close: () => pool.close(),
    pids: () => pool.pids(),
    workerStats,
  };
}

/** One task's figures over all workers: runs and failures summed, the oldest streak, the latest failure. */
function mergeTasks(each: Array<Record<string, TaskStats>>): Record<string, TaskStats> {
  const out: Record<string, TaskStats> = {};
  for (const tasks of each) {
    for (const [name, t] of Object.entries(tasks)) {
      const m = out[name];
      if (!m) { out[name] = { ...t }; continue; }
      m.runs += t.runs;
      m.failures += t.failures;
      if (t.failingSince !== null && (m.failingSince === null || t.failingSince < m.failingSince)) m.failingSince = t.failingSince;
      if (t.lastFailureAt !== null && (m.lastFailureAt === null || t.lastFailureAt > m.lastFailureAt)) {
        m.lastFailureAt = t.lastFailureAt;
        m.lastFailure = t.lastFailure;
      }
    }
  }
  return out;
}
