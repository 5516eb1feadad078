import type { Socket } from 'node:net';
import type { Logger } from '@svc/common';
import type { ActivityTracker } from './activity-tracker.ts';
import type { RouteGate } from './route-gate.ts';
import type { SignedFileUrls } from './signed-file-urls.ts';
import type { UpstreamPool } from '@svc/http1';

/** What every proxied exchange needs from the running proxy. */
export interface ProxyContext {
  gate: RouteGate;
  pool: UpstreamPool;
  activity: ActivityTracker;
  logger: Logger;
  connectTimeoutMs: number;
  /** ProxyTuning's: an upgrade's answer waits this long at most, a tunnel's quiet lasts this long. */
  requestIdleTimeoutMs: number;
  tunnelIdleTimeoutMs: number;
  /** Client sockets handed over by an Upgrade (no longer the HTTP server's), closed on shutdown. */
  upgradedSockets: Set<Socket>;
  /** Finds the sandbox of a signed file URL that names none (single-URL mode). */
  signedFiles: SignedFileUrls;
  /** Forgets a sandbox's cached route (and its idle backend connections). */
  purgeRoute(sandboxId: string): void;
}
