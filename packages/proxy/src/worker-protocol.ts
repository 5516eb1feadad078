import type { SystemAccount } from '@svc/common';
/**
 * What the proxy's primary and its worker processes tell each other (docs/data-plane.md, "Worker
 * processes"). Plain JSON: it crosses the cluster's IPC channel.
 */
import type { TaskStats } from '@svc/common';
import type { ProxyTuning } from './proxy-tuning.ts';

/** A worker's start message: what it needs to build the data path itself. */
export interface ProxyWorkerInit {
  httpPort: number;
  /** 0, or no `tls`: no HTTPS listener. */
  httpsPort: number;
  bind: string;
  /** PEM text of the HTTPS listener's certificate chain and key. */
  tls?: { cert: string; key: string };
  /** Base URL of the master's internal API (route look-ups, activity reports). */
  masterUrl: string;
  lifecycleUrls: string[];
  /** cluster_token, sent to the master and the lifecycle replicas. */
  clusterToken?: string;
  tuning: ProxyTuning;
  /** The account the worker becomes once it listens (proxy.worker_user, when the primary is root). */
  runAs?: SystemAccount;
}

/** What a worker reports when it is ready: the ports its listeners got (shared by all workers). */
export interface ProxyWorkerInfo {
  httpPort: number;
  httpsPort?: number;
}

/**
 * The primary's calls: forget routes (answered with how many were cached), look a new sandbox's
 * route up ahead of its first request (answered at once; the look-up goes on), report.
 */
export type ProxyWorkerCall =
  | { kind: 'purge'; sandboxIds?: string[] }
  | { kind: 'load'; sandboxId: string }
  | { kind: 'stats' };

export interface ProxyWorkerStats {
  pid: number;
  cachedBackends: number;
  /** Requests this worker has answered since it started. */
  answered: number;
  tasks: Record<string, TaskStats>;
}

/** The role's name: the cluster's SVC_WORKER_ROLE, and the pool's in logs. */
export const PROXY_WORKER_ROLE = 'proxy';
