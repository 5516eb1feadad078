/**
 * Request and response shapes of the template routes (docs/api.md "Templates (svc shapes)"),
 * shared by the master that serves them, our SDK and CLI that call them, and the SDK's fake.
 * Snake case on the wire, as the CLI and the E2B-style tools send them.
 */
import type { ImageInfo } from './template-center.ts';

export type TemplateStatus = 'building' | 'ready' | 'failed';
export type JobKind = 'CREATE' | 'REDO' | 'LEGACY';
export type JobStatus = 'PENDING' | 'RUNNING' | 'BUILT' | 'FAILED';
export type JobPhase = 'PULLING' | 'BUILDING' | 'UPLOADING' | 'DISTRIBUTING';
export type SourceKind = 'image' | 'oci_layout' | 'docker_archive' | 'rootfs_tar' | 'legacy';

export interface TemplateCreate {
  image?: string;
  oci_layout?: string;
  docker_archive?: string;
  rootfs_tar?: string;
  alias?: string | null;
  registry_auth?: { username: string; password: string };
  insecure_registry?: boolean;
  /** `os/arch[/variant]`; default the host's. Only for `image` and `oci_layout`. */
  platform?: string;
  with_cube_ca?: boolean;
  with_svc_ca?: boolean;
  cpu_count?: number;
  memory_mb?: number;
  disk_size_mb?: number;
}

export interface TemplateInfo {
  template_id: string;
  alias: string | null;
  status: TemplateStatus;
  source_kind: SourceKind;
  source_image_ref: string;
  latest_job_id: string | null;
  artifact_id: string | null;
  created_at: string;
  updated_at: string;
  image_info: ImageInfo | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  with_cube_ca: boolean;
  /** Built by the legacy in-process builder and not migrated yet (redo refuses it). */
  legacy: boolean;
  error: string | null;
}

export interface JobInfo {
  job_id: string;
  template_id: string;
  kind: JobKind;
  status: JobStatus;
  phase: JobPhase | null;
  artifact_id: string | null;
  error: string | null;
  progress: { layers: Array<{ digest: string; total_bytes: number; done_bytes: number }>; message: string };
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** Answer of create and redo (202). */
export interface JobAccepted {
  template_id: string;
  job_id: string;
  status: JobStatus;
}
