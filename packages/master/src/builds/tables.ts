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
  /** The tags it asked for (JSON list), given to it once ready, `default` among them. */
  tags: string | null;
  /** The team that asked for it (its template's). */
  team_id: string;
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

/** t_svc_template_tag: `name:tag` names one build of a template. */
export interface TagRow {
  template_id: string;
  tag: string;
  build_id: string;
  created_at: number;
}

/** t_svc_build_file: a team's uploaded context files, and when a build last asked for them. */
export interface BuildFileRow {
  /** The template center store's id (context-files.ts artifactIdOf). */
  artifact_id: string;
  team_id: string;
  files_hash: string;
  size_bytes: number;
  created_at: number;
  used_at: number;
}

export interface BuildTables {
  t_svc_build_file: BuildFileRow;
  t_svc_build: BuildRow;
  t_svc_build_log: BuildLogRow;
  t_svc_template_tag: TagRow;
}
