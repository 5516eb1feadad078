/**
 * What the API gateway sends and expects (docs/api.md): E2B's sandbox shapes plus the svc
 * template and node routes. Only the SDK's mapping modules read these; the public types
 * are in types.ts.
 */
/**
 * The sandbox routes' shapes come from the public API contract (@svc/contracts), the document
 * the gateway validates with; only type imports, so nothing of it is bundled.
 */
export type {
  WireListedSandbox, WireNetworkConfig as WireNetwork, WireNewSandbox, WireSandbox, WireSandboxDetail, WireSandboxMetric, WireVolumeMount,
} from '@svc/contracts';

export interface WireTemplateCreate {
  image?: string;
  oci_layout?: string;
  docker_archive?: string;
  rootfs_tar?: string;
  alias?: string;
  registry_auth?: { username: string; password: string };
  insecure_registry?: boolean;
  platform?: string;
  with_svc_ca?: boolean;
  cpu_count?: number;
  memory_mb?: number;
  disk_size_mb?: number;
}

export interface WireTemplateJobRef {
  template_id: string;
  job_id: string;
  status: string;
}

export interface WireTemplateInfo {
  template_id: string;
  alias?: string | null;
  status: 'building' | 'ready' | 'failed';
  source_image_ref?: string | null;
  latest_job_id?: string | null;
  artifact_id?: string | null;
  created_at: string;
  updated_at?: string | null;
  image_info?: unknown;
  cpu_count?: number | null;
  memory_mb?: number | null;
  disk_size_mb?: number | null;
  with_cube_ca?: boolean | null;
  with_svc_ca?: boolean | null;
  error?: string | null;
}

export interface WireJobInfo {
  job_id: string;
  template_id: string;
  kind: string;
  status: 'PENDING' | 'RUNNING' | 'BUILT' | 'FAILED';
  phase?: 'PULLING' | 'BUILDING' | 'UPLOADING' | 'DISTRIBUTING' | null;
  error?: string | null;
  progress?: {
    layers?: { digest: string; total_bytes?: number | null; done_bytes?: number | null }[];
    message?: string | null;
  } | null;
  created_at: string;
  updated_at?: string | null;
  finished_at?: string | null;
}

/** Node records are not pinned down by docs/api.md; these are the fields the SDK reads. */
export interface WireNode {
  id?: string;
  nodeID?: string;
  nodeId?: string;
  labels?: Record<string, string> | null;
  [key: string]: unknown;
}
