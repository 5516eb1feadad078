/**
 * The worker side of the proxy in worker processes (docs/data-plane.md, "Worker processes"): the
 * data path, built by the same function as in a single process, from the primary's start message;
 * the primary's calls act on it. `svc` runs it as `runWorker(startProxyWorker)` in a process forked
 * with SVC_WORKER_ROLE=proxy; worker-main.ts does the same from the sources.
 */
import { fileURLToPath } from 'node:url';
import { dropPrivileges, startTracing, workerLogger, type StartedWorker, type WorkerEntry, type WorkerStart } from '@svc/common';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startDataPath, type DataPath } from './data-path.ts';
import { answeredTotal } from './proxy-metrics.ts';
import type { ProxyWorkerCall, ProxyWorkerInfo, ProxyWorkerInit, ProxyWorkerStats } from './worker-protocol.ts';

export const startProxyWorker: WorkerStart = async (init): Promise<StartedWorker> => {
  const i = init as ProxyWorkerInit;
  // As its primary logs (the same file, or stderr), with its own pid.
  const logger = workerLogger('proxy');
  // This process's own spans, when the environment asks for traces (a no-op otherwise), under its
  // primary's service name (svc up is one service, `svc`), which the pool hands down.
  const tracing = await startTracing(process.env.SVC_WORKER_SERVICE ?? 'svc-proxy', logger);
  let path: DataPath;
  try {
    path = await startDataPath({
      httpPort: i.httpPort, httpsPort: i.httpsPort, bind: i.bind, tls: i.tls,
      master: new MasterInternalClient(i.masterUrl, { clusterToken: i.clusterToken }), lifecycleUrls: i.lifecycleUrls, clusterToken: i.clusterToken, tuning: i.tuning, logger,
    });
  } catch (err) {
    await tracing.close();
    throw err;
  }
  if (i.runAs) {
    // Listening (on the primary's sockets) and its files read: what needed root is done, and the
    // rest of its life it parses what the internet sends (docs/security.md, "The data-plane proxy's workers").
    try {
      dropPrivileges(i.runAs);
    } catch (err) {
      await path.close();
      await tracing.close();
      throw err;
    }
    logger.debug({ user: i.runAs.name, uid: i.runAs.uid }, 'proxy worker runs as an unprivileged account');
  }
  logger.debug({ httpPort: path.httpPort, httpsPort: path.httpsPort }, 'proxy worker listening');
  return {
    info: { httpPort: path.httpPort, httpsPort: path.httpsPort } satisfies ProxyWorkerInfo,
    handle: async (body) => answer(path, body as ProxyWorkerCall),
    async close() {
      await path.close();
      await tracing.close();
    },
  };
};

function answer(path: DataPath, call: ProxyWorkerCall): unknown {
  switch (call.kind) {
    case 'purge': return path.purge(call.sandboxIds);
    // Not awaited: a slow master must not hold the purges queued behind it (calls run in order).
    case 'load': path.prefetch(call.sandboxId); return undefined;
    case 'stats': return { pid: process.pid, cachedBackends: path.cachedBackends(), answered: answeredTotal(), tasks: path.tasks() } satisfies ProxyWorkerStats;
    default: throw new Error(`unknown proxy worker call ${JSON.stringify((call as { kind?: unknown }).kind)}`);
  }
}

/** The worker entry from the sources, under tsx: for tests and benchmarks (`svc` forks itself instead). */
export function proxyWorkerSourceEntry(): WorkerEntry {
  return { exec: fileURLToPath(new URL('./worker-main.ts', import.meta.url)), args: [], execArgv: ['--import', 'tsx'] };
}
