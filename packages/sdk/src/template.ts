/**
 * `Template`: svc's template routes (`/svc/template...`): build a template from a
 * registry image, an OCI layout, a docker archive or a root filesystem tarball, follow
 * the build job, alias, rebuild, migrate and delete.
 */
import { ApiClient } from './api-client.ts';
import { InvalidArgumentError, SandboxError, TemplateNotFoundError, TimeoutError } from './errors.ts';
import type {
  JobInfo, SandboxApiOpts, TemplateBuildRef, TemplateCreateOpts, TemplateInfo,
} from './types.ts';
import type { WireJobInfo, WireTemplateCreate, WireTemplateInfo, WireTemplateJobRef } from './wire.ts';

const ALIAS_PATTERN = /^[a-z0-9-]{1,64}$/;

export interface WaitForBuildOpts extends SandboxApiOpts {
  /** Called with every job snapshot while polling. */
  onProgress?: (job: JobInfo) => void;
  /** Poll interval in ms. Default 1000. */
  pollMs?: number;
  /** Give up after this many ms; 0 waits forever (the default). */
  timeoutMs?: number;
}

export class Template {
  static async list(opts: SandboxApiOpts = {}): Promise<TemplateInfo[]> {
    const res = await new ApiClient(opts).call('GET', '/svc/template', { signal: opts.signal });
    return (res?.templates ?? []).map(toTemplateInfo);
  }

  /** By id or alias. */
  static async get(templateId: string, opts: SandboxApiOpts = {}): Promise<TemplateInfo> {
    return toTemplateInfo(await new ApiClient(opts).call('GET', '/svc/template/{id}', { params: { id: templateId }, notFound: TemplateNotFoundError, signal: opts.signal }));
  }

  /** Starts a build; follow it with `status` or `waitForBuild`. */
  static async create(spec: TemplateCreateOpts, opts: SandboxApiOpts = {}): Promise<TemplateBuildRef> {
    const ref = await new ApiClient(opts).call('POST', '/svc/template', { body: buildCreateBody(spec), signal: opts.signal });
    return toBuildRef(ref);
  }

  /** True when deleted, false when there was no such template. */
  static async delete(templateId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    try {
      await new ApiClient(opts).call('DELETE', '/svc/template/{id}', { params: { id: templateId }, notFound: TemplateNotFoundError, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof TemplateNotFoundError) return false;
      throw err;
    }
  }

  /** Sets the alias; no alias (or '') clears it. */
  static async setAlias(templateId: string, alias?: string | null, opts: SandboxApiOpts = {}): Promise<TemplateInfo> {
    if (alias) checkAlias(alias);
    const info = await new ApiClient(opts).call('PUT', '/svc/template/{id}/alias', {
      params: { id: templateId },
      body: { alias: alias || null },
      notFound: TemplateNotFoundError,
      signal: opts.signal,
    });
    return toTemplateInfo(info);
  }

  /** The build job's state and progress. */
  static async status(jobId: string, opts: SandboxApiOpts = {}): Promise<JobInfo> {
    const job = await new ApiClient(opts).call('GET', '/svc/template/build/{jobId}/status', {
      params: { jobId },
      notFound: TemplateNotFoundError,
      signal: opts.signal,
    });
    return toJobInfo(job);
  }

  /** Rebuilds (or redistributes) a template. */
  static async redo(templateId: string, opts: SandboxApiOpts = {}): Promise<TemplateBuildRef> {
    const ref = await new ApiClient(opts).call('POST', '/svc/template/redo', {
      body: { template_id: templateId },
      notFound: TemplateNotFoundError,
      signal: opts.signal,
    });
    return toBuildRef(ref);
  }

  /** Moves a legacy artifact into the template center's store (CLI: `tpl merge`). */
  static async migrate(templateId: string, opts: SandboxApiOpts = {}): Promise<TemplateInfo> {
    const info = await new ApiClient(opts).call('POST', '/svc/template/migrate', {
      body: { template_id: templateId },
      notFound: TemplateNotFoundError,
      signal: opts.signal,
    });
    return toTemplateInfo(info);
  }

  /** Polls the job until BUILT (returned) or FAILED (thrown as SandboxError with the job's error). */
  static async waitForBuild(jobId: string, opts: WaitForBuildOpts = {}): Promise<JobInfo> {
    const started = Date.now();
    const pollMs = opts.pollMs ?? 1000;
    for (;;) {
      const job = await Template.status(jobId, opts);
      opts.onProgress?.(job);
      if (job.status === 'BUILT') return job;
      if (job.status === 'FAILED') throw new SandboxError(`template build ${jobId} failed: ${job.error || 'no reason given'}`, { code: 'build_failed' });
      if (opts.timeoutMs && Date.now() - started > opts.timeoutMs) {
        throw new TimeoutError(`template build ${jobId} did not finish within ${opts.timeoutMs} ms`);
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }
}

function checkAlias(alias: string): void {
  if (!ALIAS_PATTERN.test(alias)) throw new InvalidArgumentError(`alias ${JSON.stringify(alias)} must be 1 to 64 characters of a-z, 0-9 and '-'`);
}

function buildCreateBody(spec: TemplateCreateOpts): WireTemplateCreate {
  const s = spec as Partial<Record<'image' | 'ociLayout' | 'dockerArchive' | 'rootfsTar', string>> & TemplateCreateOpts;
  const sources = (['image', 'ociLayout', 'dockerArchive', 'rootfsTar'] as const).filter((k) => s[k]);
  if (sources.length !== 1) {
    throw new InvalidArgumentError('give exactly one template source: image, ociLayout, dockerArchive or rootfsTar');
  }
  if (spec.alias) checkAlias(spec.alias);
  if (spec.platform && !/^[a-z0-9]+\/[a-z0-9_]+(\/[a-z0-9]+)?$/.test(spec.platform)) {
    throw new InvalidArgumentError(`platform ${JSON.stringify(spec.platform)} must look like os/arch[/variant]`);
  }
  const body: WireTemplateCreate = {};
  if (s.image) body.image = s.image;
  if (s.ociLayout) body.oci_layout = s.ociLayout;
  if (s.dockerArchive) body.docker_archive = s.dockerArchive;
  if (s.rootfsTar) body.rootfs_tar = s.rootfsTar;
  if (spec.alias) body.alias = spec.alias;
  if (spec.registryAuth) body.registry_auth = spec.registryAuth;
  if (spec.insecureRegistry !== undefined) body.insecure_registry = spec.insecureRegistry;
  if (spec.platform) body.platform = spec.platform;
  if (spec.withSvcCa !== undefined) body.with_svc_ca = spec.withSvcCa;
  if (spec.cpuCount !== undefined) body.cpu_count = spec.cpuCount;
  if (spec.memoryMB !== undefined) body.memory_mb = spec.memoryMB;
  if (spec.diskSizeMB !== undefined) body.disk_size_mb = spec.diskSizeMB;
  if (spec.readyCmd !== undefined && spec.startCmd === undefined) throw new InvalidArgumentError('readyCmd needs startCmd');
  if (spec.startCmd !== undefined) body.start_cmd = spec.startCmd;
  if (spec.readyCmd !== undefined) body.ready_cmd = spec.readyCmd;
  if (spec.runtime !== undefined) body.runtime = spec.runtime;
  return body;
}

const date = (s?: string | null) => (s ? new Date(s) : undefined);
const opt = <T>(v: T | null | undefined): T | undefined => (v === null ? undefined : v);

function toBuildRef(r: WireTemplateJobRef): TemplateBuildRef {
  return { templateId: r.template_id, jobId: r.job_id, status: r.status };
}

function toTemplateInfo(t: WireTemplateInfo): TemplateInfo {
  const info: TemplateInfo = { templateId: t.template_id, status: t.status, createdAt: new Date(t.created_at) };
  const optional: Partial<TemplateInfo> = {
    alias: opt(t.alias) || undefined,
    sourceImageRef: opt(t.source_image_ref),
    latestJobId: opt(t.latest_job_id),
    artifactId: opt(t.artifact_id),
    updatedAt: date(t.updated_at),
    imageInfo: opt(t.image_info),
    cpuCount: opt(t.cpu_count),
    memoryMB: opt(t.memory_mb),
    diskSizeMB: opt(t.disk_size_mb),
    withSvcCa: t.with_cube_ca,
    startCmd: opt(t.start_cmd),
    readyCmd: opt(t.ready_cmd),
    runtime: opt(t.runtime),
    error: opt(t.error) || undefined,
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (info as unknown as Record<string, unknown>)[k] = v;
  return info;
}

function toJobInfo(j: WireJobInfo): JobInfo {
  const info: JobInfo = {
    jobId: j.job_id,
    templateId: j.template_id,
    kind: j.kind,
    status: j.status,
    progress: {
      layers: (j.progress?.layers ?? []).map((l) => ({
        digest: l.digest,
        ...(l.total_bytes !== undefined && l.total_bytes !== null ? { totalBytes: l.total_bytes } : {}),
        doneBytes: l.done_bytes ?? 0,
      })),
      ...(j.progress?.message ? { message: j.progress.message } : {}),
    },
    createdAt: new Date(j.created_at),
  };
  if (j.phase) info.phase = j.phase;
  if (j.error) info.error = j.error;
  if (j.updated_at) info.updatedAt = new Date(j.updated_at);
  if (j.finished_at) info.finishedAt = new Date(j.finished_at);
  return info;
}
