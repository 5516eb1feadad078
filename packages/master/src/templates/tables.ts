/**
 * Row types of the template tables. Booleans are 0/1, times epoch milliseconds (see db/schema.ts).
 *
 *   t_svc_template             one row per template
 *   t_svc_template_job         build jobs (CREATE, REDO, LEGACY)
 *   t_svc_template_artifact    ext4 root filesystems the template center stores
 *   t_svc_template_placement   which node holds a copy of which artifact ("replica rows")
 *   t_svc_template_definition  a (template, artifact) pairing sandboxes were or are created from
 */

import type { JobKind, JobPhase, JobStatus, SourceKind, TemplateStatus } from '@svc/contracts/template-routes';

export type { JobKind, JobPhase, JobStatus, SourceKind, TemplateStatus };
export type ArtifactStatus = 'PENDING' | 'BUILDING' | 'READY' | 'CLEANUP_PENDING';
/** `legacy-local`: a file on the master's disk, written by the legacy in-process builder. */
type ArtifactStorage = 'local' | 's3' | 'legacy-local';

export interface TemplateRow {
  template_id: string;
  alias: string | null;
  source_kind: string;
  source_image_ref: string;
  /** The build source (BuildSource JSON, registry credentials included) a redo rebuilds from; null for legacy templates. */
  request_json: string | null;
  spec_hash: string;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  with_cube_ca: number;
  latest_job_id: string | null;
  artifact_id: string | null;
  image_info: string | null;
  status: string;
  error: string | null;
  legacy: number;
  /** Made by the builder: the build snapshot its sandboxes start from (over that snapshot's artifact). */
  layer_snapshot_id: string | null;
  /** The builder's start and ready commands. */
  start_cmd: string | null;
  ready_cmd: string | null;
  /** The runtime its sandboxes run on when a create names none; null: the node's default (docs/runtimes.md). */
  runtime: string | null;
  /** The team it belongs to; public 1: every team may start sandboxes from it (docs/security.md). */
  team_id: string;
  public: number;
  created_at: number;
  updated_at: number;
}

export interface JobRow {
  job_id: string;
  template_id: string;
  kind: string;
  status: string;
  phase: string | null;
  /** The BuildRequest sent to the template center (credentials removed), or the redo's reuse decision. */
  request_json: string;
  source_image_ref: string;
  spec_hash: string;
  /**
   * Equal to spec_hash while the job is PENDING or RUNNING, null afterwards. A unique index on it
   * is what keeps "at most one active job per spec" true across several masters.
   */
  active_spec_hash: string | null;
  artifact_id: string | null;
  error: string | null;
  /** Last JobProgress seen (layers, message), kept for finished jobs. */
  progress_json: string | null;
  /** ImageInfo the template center reported with BUILT. */
  image_info: string | null;
  last_progress_at: number;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export interface ArtifactRow {
  artifact_id: string;
  spec_hash: string;
  sha256: string | null;
  size_bytes: number | null;
  status: string;
  storage: string | null;
  location: string | null;
  download_url: string | null;
  url_expires_at: number | null;
  /** Set while nothing references the artifact; the GC sweep deletes it once passed. */
  gc_deadline_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface PlacementRow {
  artifact_id: string;
  node_id: string;
  /** READY on the node, or DELETING while phase 2 of the artifact deletion runs. */
  status: string;
  updated_at: number;
}

export interface DefinitionRow {
  template_id: string;
  artifact_id: string;
  job_id: string;
  created_at: number;
  /** When the template moved to another artifact or was deleted; null while current. */
  superseded_at: number | null;
}

export interface TemplateTables {
  t_svc_template: TemplateRow;
  t_svc_template_job: JobRow;
  t_svc_template_artifact: ArtifactRow;
  t_svc_template_placement: PlacementRow;
  t_svc_template_definition: DefinitionRow;
}
