import { newJobId, newTemplateId, type Logger, type SvcConfig } from '@svc/common';
import type { ImageInfo, TemplateCenterClient } from '@svc/contracts/template-center';
import { parseAlias } from './alias.ts';
import { invalidTemplateRequest } from './errors.ts';
import type { ArtifactStore, DefinitionStore } from './store/artifacts.ts';
import type { JobStore } from './store/jobs.ts';
import type { TemplateStore } from './store/templates.ts';
import type { TemplateRow } from './tables.ts';
import { ownerColumns, OPERATOR } from './template-owner.ts';

/** A template built by the legacy in-process builder, found on the master's disk (import path). */
export interface LegacyTemplateInput {
  alias?: string | null;
  localPath: string;
  sha256: string;
  sizeBytes: number;
  sourceImageRef?: string;
  cpuCount?: number;
  memoryMB?: number;
  diskSizeMB?: number;
  withCubeCa?: boolean;
  imageInfo?: ImageInfo;
}

interface LegacyDeps {
  cfg: SvcConfig;
  templates: TemplateStore;
  jobs: JobStore;
  artifacts: ArtifactStore;
  definitions: DefinitionStore;
  templateCenter: TemplateCenterClient;
  logger: Logger;
}

/** Records a template the legacy in-process builder made (its ext4 file is on the master's disk); answers its id. */
export async function registerLegacyTemplate(d: LegacyDeps, input: LegacyTemplateInput): Promise<string> {
  const alias = parseAlias(input.alias);
  const defaults = d.cfg.svclet_conf;
  const now = Date.now();
  const templateId = newTemplateId();
  const artifactId = `art-legacy-${templateId.slice(4)}`;
  const jobId = newJobId();
  const t: TemplateRow = {
    template_id: templateId, alias, source_kind: 'legacy', source_image_ref: input.sourceImageRef ?? '', request_json: null,
    spec_hash: `legacy:${artifactId}`, cpu_count: input.cpuCount ?? defaults.default_cpu_count,
    memory_mb: input.memoryMB ?? defaults.default_memory_mb, disk_size_mb: input.diskSizeMB ?? defaults.default_disk_size_mb,
    with_cube_ca: input.withCubeCa === false ? 0 : 1, latest_job_id: jobId, artifact_id: artifactId,
    image_info: input.imageInfo ? JSON.stringify(input.imageInfo) : null, status: 'ready', error: null, legacy: 1,
    layer_snapshot_id: null, start_cmd: null, ready_cmd: null, runtime: null, ...ownerColumns(OPERATOR), created_at: now, updated_at: now,
  };
  await d.templates.insert(t);
  await d.artifacts.insert({
    artifact_id: artifactId, spec_hash: t.spec_hash, sha256: input.sha256, size_bytes: input.sizeBytes, status: 'READY',
    storage: 'legacy-local', location: input.localPath, download_url: null, url_expires_at: null, gc_deadline_at: null,
    created_at: now, updated_at: now,
  });
  await d.jobs.insertFinished({
    job_id: jobId, template_id: templateId, kind: 'LEGACY', status: 'BUILT', phase: null,
    request_json: JSON.stringify({ legacy: true, localPath: input.localPath }), source_image_ref: t.source_image_ref,
    spec_hash: t.spec_hash, active_spec_hash: null, artifact_id: artifactId, error: null, progress_json: null,
    image_info: t.image_info, last_progress_at: now, created_at: now, updated_at: now, finished_at: now,
  });
  await d.definitions.makeCurrent(templateId, artifactId, jobId);
  return templateId;
}

/** Moves a legacy artifact of `t` from the master's disk into the template center store (CLI tpl merge). */
export async function migrateLegacyTemplate(d: LegacyDeps, t: TemplateRow): Promise<void> {
  if (!t.artifact_id) throw invalidTemplateRequest(`template ${t.template_id} has no artifact to migrate`);
  const a = await d.artifacts.get(t.artifact_id);
  if (!a || a.status !== 'READY') throw invalidTemplateRequest(`artifact ${t.artifact_id} of template ${t.template_id} is ${a?.status ?? 'missing'}, not READY`);
  if (a.storage === 'legacy-local') {
    const stored = await d.templateCenter.migrate(a.artifact_id, a.location!);
    if (a.sha256 && stored.sha256 !== a.sha256) {
      d.logger.warn({ artifactId: a.artifact_id, recorded: a.sha256, stored: stored.sha256 }, 'migrated artifact has another sha256 than recorded; keeping the stored one');
    }
    await d.artifacts.update(a.artifact_id, {
      storage: stored.storage, location: stored.location, sha256: stored.sha256, size_bytes: stored.sizeBytes,
      download_url: stored.downloadUrl ?? null, url_expires_at: stored.urlExpiresAt ? Date.parse(stored.urlExpiresAt) || null : null,
    });
    d.logger.info({ templateId: t.template_id, artifactId: a.artifact_id, storage: stored.storage }, 'legacy artifact migrated');
  }
  if (Number(t.legacy) === 1) await d.templates.update(t.template_id, { legacy: 0 });
}
