export interface ProxyTuning {
  /** How long a running route is served from the cache without asking the master. */
  routeCacheTtlMs: number;
  routeLookupTimeoutMs: number;
  activityFlushMs: number;
  announceIntervalMs: number;
  /** Longest a request waits for a pausing/resuming sandbox to settle. */
  settleWaitMs: number;
  settlePollMs: number;
  /** Longest a request waits for an auto-resume. */
  resumeTimeoutMs: number;
  connectTimeoutMs: number;
  /** Idle keep-alive connections to sandboxes are closed after this. */
  idleBackendSocketMs: number;
  /** A client's idle keep-alive connection closes after this (longer than the usual client pool's idle time, so the client closes first). */
  clientKeepAliveMs: number;
  /** A client's request head must arrive whole within this of its first byte (else 408). */
  clientHeadersTimeoutMs: number;
  /**
   * A request (or an upgrade not yet answered 101) ends after this long without a byte either
   * way: 504 when the sandbox has not answered yet. Long polls and streams go on as long as
   * bytes flow; a handler that works for minutes before its first byte has this long.
   */
  requestIdleTimeoutMs: number;
  /** An open tunnel (a WebSocket) closes after this long without a byte either way. */
  tunnelIdleTimeoutMs: number;
}

export const DEFAULT_PROXY_TUNING: ProxyTuning = {
  routeCacheTtlMs: 2_000,
  routeLookupTimeoutMs: 5_000,
  activityFlushMs: 1_000,
  announceIntervalMs: 3_000,
  settleWaitMs: 15_000,
  settlePollMs: 100,
  resumeTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  idleBackendSocketMs: 4_000,
  clientKeepAliveMs: 65_000,
  clientHeadersTimeoutMs: 66_000,
  requestIdleTimeoutMs: 10 * 60_000,
  // The egress proxy's limit for a sandbox's own tunnels (EGRESS_DEFAULTS.ioTimeoutMs).
  tunnelIdleTimeoutMs: 2 * 60 * 60_000,
};
