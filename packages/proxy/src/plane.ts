/**
 * The data path as the proxy's control parts (admin API, events) see it, wherever it runs: in
 * this process (localPlane) or in worker processes (worker-plane.ts). Every change resolves once
 * the data path holds it: in worker mode, once every worker acknowledged it.
 */
import type { TaskStats } from '@svc/common';
import type { DataPath } from './data-path.ts';
import type { ProxyWorkerStats } from './worker-protocol.ts';

export interface Plane {
  httpPort: number;
  httpsPort?: number;
  /** Forgets the given sandboxes' routes, or every route, everywhere; answers how many were cached. */
  purge(sandboxIds: string[] | undefined): Promise<number>;
  /** Looks a new sandbox's route up ahead of its first request; failures are logged. */
  prefetch(sandboxId: string): void;
  /** Cached routes (summed over the workers) and the data path's background tasks (merged). */
  stats(): Promise<{ cachedBackends: number; tasks: Record<string, TaskStats> }>;
  close(): Promise<void>;
  /** Worker mode: the workers' process ids. */
  pids?(): number[];
  /** Worker mode: each live worker's own figures. */
  workerStats?(): Promise<ProxyWorkerStats[]>;
}

export function localPlane(path: DataPath): Plane {
  return {
    httpPort: path.httpPort,
    httpsPort: path.httpsPort,
    purge: async (ids) => path.purge(ids),
    prefetch: (id) => path.prefetch(id),
    stats: async () => ({ cachedBackends: path.cachedBackends(), tasks: path.tasks() }),
    close: () => path.close(),
  };
}
