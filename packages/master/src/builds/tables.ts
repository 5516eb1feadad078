/** t_svc_build and t_svc_build_log: E2B's template builds (docs/templates.md, "The builder"). */
export type BuildStatus = 'waiting' | 'building' | 'ready' | 'error';

export interface BuildRow {
  build_id: string;
  template_id: string;
  status: BuildStatus;
  cpu_count: number;
  memory_mb: number;
  /** The start request as it came (E2bBuildStart JSON); null while waiting for it. */
  spec: string | null;
  /** Why it failed: JSON {message, step}. */
  reason: string | null;
  /** The build snapshot its template starts from, once ready. */
  snapshot_id: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export interface BuildLogRow {
  build_id: string;
  seq: number;
  at: number;
  level: string;
  message: string;
}

export interface BuildTables {
  t_svc_build: BuildRow;
  t_svc_build_log: BuildLogRow;
}
