import type { ImageInfo, JobProgress } from '@svc/contracts/template-center';
import type { JobKind, JobPhase, JobRow, JobStatus, SourceKind, TemplateRow, TemplateStatus } from './tables.ts';
import type { JobInfo, TemplateInfo } from '@svc/contracts/template-routes';

const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

export function toTemplateInfo(t: TemplateRow): TemplateInfo {
  return {
    template_id: t.template_id,
    alias: t.alias,
    status: t.status as TemplateStatus,
    source_kind: t.source_kind as SourceKind,
    source_image_ref: t.source_image_ref,
    latest_job_id: t.latest_job_id,
    artifact_id: t.artifact_id,
    created_at: iso(t.created_at)!,
    updated_at: iso(t.updated_at)!,
    image_info: t.image_info ? JSON.parse(t.image_info) as ImageInfo : null,
    cpu_count: Number(t.cpu_count),
    memory_mb: Number(t.memory_mb),
    disk_size_mb: Number(t.disk_size_mb),
    with_cube_ca: Number(t.with_cube_ca) === 1,
    legacy: Number(t.legacy) === 1,
    error: t.error,
    ...(t.start_cmd ? { start_cmd: t.start_cmd, ready_cmd: t.ready_cmd } : {}),
    ...(t.runtime === 'gvisor' || t.runtime === 'microvm' ? { runtime: t.runtime } : {}),
  };
}

/** `live` is the template center's current progress for an active job; finished jobs show their last snapshot. */
export function toJobInfo(j: JobRow, live: JobProgress | null): JobInfo {
  const p = live ?? (j.progress_json ? JSON.parse(j.progress_json) as JobProgress : null);
  return {
    job_id: j.job_id,
    template_id: j.template_id,
    kind: j.kind as JobKind,
    status: j.status as JobStatus,
    phase: j.phase as JobPhase | null,
    artifact_id: j.artifact_id,
    error: j.error,
    progress: {
      layers: (p?.layers ?? []).map((l) => ({ digest: l.digest, total_bytes: l.totalBytes, done_bytes: l.doneBytes })),
      message: p?.message ?? '',
    },
    created_at: iso(j.created_at)!,
    updated_at: iso(j.updated_at)!,
    finished_at: iso(j.finished_at),
  };
}
