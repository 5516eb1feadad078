import type { Logger } from '@svc/common';
import type { ActivityTracker } from './activity-tracker.ts';
import type { RouteGate } from './route-gate.ts';
import type { UpstreamPool } from './upstream-pool.ts';

/** What every proxied exchange needs from the running proxy. */
export interface ProxyContext {
  gate: RouteGate;
  pool: UpstreamPool;
  activity: ActivityTracker;
  logger: Logger;
  connectTimeoutMs: number;
  /** Forgets a sandbox's cached route (and its idle backend connections). */
  purgeRoute(sandboxId: string): void;
}
