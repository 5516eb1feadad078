import type { DataPathSettings } from './data-path.ts';
import type { PlaceholderSource } from './placeholders.ts';
import type { PolicyChange, PolicySnapshot } from './policy-sync.ts';

/**
 * What passes between the egress proxy's primary and its worker processes (docs/egress.md
 * "Worker processes"): plain data only, as it crosses IPC.
 */

/** A worker's start message, taken when it is forked: a replacement starts from the state as it is then. */
export interface EgressWorkerInit {
  settings: DataPathSettings;
  /** The primary made or loaded the CA there before forking (EgressCa.loadOrCreate). */
  caDir: string;
  placeholderSource?: PlaceholderSource;
  /** The primary logger's level; a worker logs to stderr as the primary does. */
  logLevel: string;
  policies: PolicySnapshot;
}

/** What a worker reports at ready: its listeners' ports, the same in every worker. */
export interface EgressWorkerInfo {
  httpPort: number;
  httpsPort: number;
  tunnelPort: number;
}

/** One worker's answer to a stats call: tests and diagnostics see how the work spread. */
export interface EgressWorkerStats {
  pid: number;
  /** Connections its listeners accepted since it started. */
  connections: number;
  policies: number;
  ready: boolean;
}

/** The primary's calls: a policy change, a stats question, or close (stop serving, send the last audit lines, answer). */
export type EgressWorkerCall = PolicyChange | { kind: 'stats' } | { kind: 'close' };

/** The SVC_WORKER_ROLE of egress workers. */
export const EGRESS_WORKER_ROLE = 'egress';
