import { WorkerPool, type Logger, type WorkerEntry } from '@svc/common';
import { AUDIT_FLUSH_MS, auditTimestamp, type AuditLog } from './audit-log.ts';
import { isAuditLinesEvent } from './audit-sink.ts';
import type { DataPathSettings } from './data-path.ts';
import type { PlaceholderSource } from './placeholders.ts';
import type { PolicyStore } from './policy-store.ts';
import { snapshotOf, type PolicyChange } from './policy-sync.ts';
import { EGRESS_WORKER_ROLE, type EgressWorkerCall, type EgressWorkerInfo, type EgressWorkerInit, type EgressWorkerStats } from './worker-protocol.ts';

export interface EgressWorkersOptions {
  count: number;
  entry: WorkerEntry;
  settings: DataPathSettings;
  caDir: string;
  placeholderSource?: PlaceholderSource;
  /** The authoritative policies: each worker starts from them as they are when it is forked. */
  store: PolicyStore;
  /** The one audit file: the workers' lines are appended here. */
  audit: AuditLog;
  logger: Logger;
}

/** The data path as the primary sees it when it runs in worker processes. */
export interface EgressWorkers extends EgressWorkerInfo {
  /** Resolves once every worker has applied the change (a worker that died meanwhile is replaced from the store). */
  onChange(change: PolicyChange): Promise<void>;
  pids(): number[];
  stats(): Promise<EgressWorkerStats[]>;
  close(): Promise<void>;
}

/**
 * libuv's thread pool, which runs every getaddrinfo of a worker (dns-cache.ts), has 4 threads by
 * default: two sandboxes whose names' servers never answer (4 lookups each at once, 5 s apiece)
 * held all of them, and every other sandbox's new names waited behind. 32 threads cost address
 * space, not memory, until used. An operator's own value stays. (The audit file is written by
 * the primary, whose pool is node's default.)
 */
const EGRESS_THREADPOOL_SIZE = '32';

function workerEnv(): Record<string, string> {
  return process.env.UV_THREADPOOL_SIZE ? {} : { UV_THREADPOOL_SIZE: EGRESS_THREADPOOL_SIZE };
}

/**
 * Forks the egress workers (docs/egress.md "Worker processes"). The primary keeps the state
 * that must be exact, the policies and the audit file; the workers serve the sandboxes'
 * connections on listeners they share.
 */
export async function startEgressWorkers(o: EgressWorkersOptions): Promise<EgressWorkers> {
  const { logger, audit } = o;
  const pool = await WorkerPool.start<EgressWorkerInit>({
    role: EGRESS_WORKER_ROLE,
    count: o.count,
    entry: o.entry,
    logger,
    // The audit lines (JSON text) every 10 ms: structured clone copies them where JSON escaped every
    // quote and parsed them again (the primary's CPU per proxied request 2.2-2.6 -> 1.5-2.0 us).
    serialization: 'advanced',
    env: workerEnv(),
    init: () => ({
      settings: o.settings,
      caDir: o.caDir,
      ...(o.placeholderSource ? { placeholderSource: o.placeholderSource } : {}),
      logLevel: logger.level,
      policies: snapshotOf(o.store),
    }),
    // A worker that served and died took its open connections' records and its last batch with it:
    // the file says so where the gap is (docs/egress.md "Worker processes").
    onExit: ({ pid, code, signal, ready }) => {
      if (!ready) return; // it never served: nothing of it is missing
      const exit = signal ?? `code ${code}`;
      audit.write({
        type: 'audit_gap', ts: auditTimestamp(), reason: 'worker_exited', pid, exit,
        detail: `egress worker ${pid} ended (${exit}): the records of the connections it held and of its last ${AUDIT_FLUSH_MS} ms are not in the log`,
      });
    },
    onEvent: (body, workerId) => {
      if (isAuditLinesEvent(body)) { audit.writeLines(body.lines); return; }
      logger.error({ workerId, kind: (body as { kind?: unknown } | undefined)?.kind }, 'egress worker sent an event that is not a batch of audit lines; dropped');
    },
  });
  const call = (body: EgressWorkerCall) => pool.broadcast(body);
  const info = pool.info as EgressWorkerInfo;
  return {
    httpPort: info.httpPort,
    httpsPort: info.httpsPort,
    tunnelPort: info.tunnelPort,
    onChange: call,
    pids: () => pool.pids(),
    stats: async () => (await pool.request({ kind: 'stats' } satisfies EgressWorkerCall)) as EgressWorkerStats[],
    close: async () => {
      // Each worker stops serving and sends its last audit lines before it answers: they are in before the file closes.
      await call({ kind: 'close' }).catch((err: Error) => logger.error({ err: err.message }, 'an egress worker failed to close; its last audit lines may be lost'));
      await pool.close();
    },
  };
}
