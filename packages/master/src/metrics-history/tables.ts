/**
 * The metrics history's tables (docs/observability.md, "Metrics history"). Times are epoch
 * milliseconds (db/schema.ts); a sample's time is whole seconds, as E2B's `timestampUnix`.
 */
export interface SandboxMetricRow {
  sandbox_id: string;
  team_id: string;
  at: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_used: number;
  mem_total: number;
  mem_cache: number;
  disk_used: number;
  disk_total: number;
}

/** One sampling interval of a team: written only when it ran or started sandboxes. */
export interface TeamMetricRow {
  team_id: string;
  /** The interval's end. */
  at: number;
  concurrent: number;
  /** Sandboxes started within the interval. */
  starts: number;
  interval_ms: number;
}

export interface MetricsHistoryTables {
  t_svc_sandbox_metric: SandboxMetricRow;
  t_svc_team_metric: TeamMetricRow;
}
