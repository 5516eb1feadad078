import { fileURLToPath } from 'node:url';
import { workerLogger, type WorkerEntry, type WorkerStart } from '@svc/common';
import { ForwardingAuditSink, liveSecretsOf } from './audit-sink.ts';
import { EgressCa } from './certificates.ts';
import { startEgressDataPath } from './data-path.ts';
import { PlaceholderResolver, placeholderSourcesOf } from './placeholders.ts';
import { platformSourceOf } from './platform-guard.ts';
import { applyPolicyChange, isPolicyChange, replicaOf } from './policy-sync.ts';
import type { EgressWorkerCall, EgressWorkerInfo, EgressWorkerInit, EgressWorkerStats } from './worker-protocol.ts';

/**
 * One egress worker process (docs/egress.md "Worker processes"): the data path exactly as the
 * proxy runs it in-process (startEgressDataPath), on listeners shared with the other workers,
 * with a replica of the primary's policies that every change reaches before the primary
 * acknowledges it, and an audit sink that sends the lines to the primary's one file.
 */
export const startEgressWorker: WorkerStart = async (raw, emit) => {
  const init = raw as EgressWorkerInit;
  // Into the primary's log file when it has one (svc up's svc.log), as the primary logs.
  const logger = workerLogger('egress');
  logger.level = init.logLevel;
  const ca = await EgressCa.load(init.caDir);
  const store = replicaOf(init.policies);
  const placeholders = new PlaceholderResolver(init.placeholderSource && placeholderSourcesOf(init.placeholderSource));
  const audit = new ForwardingAuditSink(liveSecretsOf(store, placeholders), emit);
  const platformSource = platformSourceOf(init.placeholderSource);
  const dataPath = await startEgressDataPath(init.settings, { ca, store, placeholders, audit, logger, ...(platformSource ? { platformSource } : {}) });
  logger.debug({ pid: process.pid, policies: store.size, ready: store.ready }, 'egress worker serving');

  let closing: Promise<void> | undefined;
  // The audit lines of the connections the close ends go out before close resolves (before the reply to a close call).
  const close = () => closing ??= dataPath.close().finally(() => audit.close());
  const info: EgressWorkerInfo = { httpPort: dataPath.httpPort, httpsPort: dataPath.httpsPort, tunnelPort: dataPath.tunnelPort };
  return {
    info,
    handle: async (body: unknown) => {
      if (isPolicyChange(body)) { applyPolicyChange(store, body); return undefined; }
      const call = body as EgressWorkerCall | undefined;
      if (call?.kind === 'stats') return { pid: process.pid, connections: dataPath.connections(), policies: store.size, ready: store.ready } satisfies EgressWorkerStats;
      if (call?.kind === 'close') { await close(); return undefined; }
      throw new Error(`egress worker: unknown call ${JSON.stringify(call?.kind)}`);
    },
    close,
  };
};

/** The worker entry from the sources (tests and benchmarks run the package under tsx). */
export function egressWorkerSourceEntry(): WorkerEntry {
  return { exec: fileURLToPath(new URL('./worker-main.ts', import.meta.url)), args: [], execArgv: ['--import', 'tsx'] };
}
