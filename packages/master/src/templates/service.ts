import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import type { Owner } from '../teams/ownership.ts';
import type { Kysely } from 'kysely';
import {
  badRequest, conflict, newJobId, newTemplateId, notFound, type Coordination, type Logger, type SvcConfig,
} from '@svc/common';
import type { ImageInfo, TemplateCenterClient } from '@svc/contracts/template-center';
import type { Database } from '../db/schema.ts';
import type { ResolvedTemplate, TemplateResolver } from '../sandboxes/ports.ts';
import type { LayerRef, RuntimeKind } from '@svc/contracts/node-agent';
import type { BuilderStatus } from './builder-port.ts';
import { parseAlias } from './alias.ts';
import { artifactRef } from './artifact-url.ts';
import type { BuildJobs } from './build-jobs.ts';
import type { ArtifactCleanup } from './cleanup.ts';
import { parseCreateRequest } from './create-request.ts';
import { invalidTemplateRequest, templateHasSnapshots, templateIdRequired, templateNotFound } from './errors.ts';
import { platformTemplateReady } from './platform-templates.ts';
import { readProgress } from './progress.ts';
import type { BuildRecipe } from './recipe.ts';
import { toJobInfo, toTemplateInfo } from './render.ts';
import { buildSnapshotsOnlyOf, liveSandboxCount, snapshotsOfTemplate, type ArtifactStore, type DefinitionStore } from './store/artifacts.ts';
import { ACTIVE, type JobStore } from './store/jobs.ts';
import type { TemplateStore } from './store/templates.ts';
import type { ArtifactRow, JobRow, TemplateRow } from './tables.ts';
import type { JobAccepted, JobInfo, TemplateCreate, TemplateInfo } from '@svc/contracts/template-routes';

/** Whom a template's start command runs as when its build or image recorded no user (E2B's default user). */
const BUILD_DEFAULT_USER = 'user';

/** A template's start command, if it has one, as its sandboxes run it: as its user, in its directory. */
function startOf(t: TemplateRow, info: Partial<ImageInfo>): Pick<ResolvedTemplate, 'start'> {
  if (!t.start_cmd) return {};
  return { start: { command: t.start_cmd, ...(t.ready_cmd ? { readyCommand: t.ready_cmd } : {}), user: info.user ?? BUILD_DEFAULT_USER, ...(info.workingDir ? { cwd: info.workingDir } : {}) } };
}

export interface TemplateServiceDeps {
  cfg: SvcConfig;
  db: Kysely<Database>;
  templates: TemplateStore;
  jobs: JobStore;
  artifacts: ArtifactStore;
  definitions: DefinitionStore;
  builds: BuildJobs;
  cleanup: ArtifactCleanup;
  templateCenter: TemplateCenterClient;
  coordination: Coordination;
  logger: Logger;
  /** The layers of templates the builder made (the snapshot module's). */
  builtLayers?: BuiltLayers;
  /** Removes a deleted builder template's build snapshots (the snapshot module's). */
  snapshots?: { deleteBuildSnapshot(snapshotId: string): Promise<void> };
  /** The builder's tags (a create of `name:tag`). */
  builder?: Pick<BuilderStatus, 'snapshotOfTag'>;
}

/** Where a built template's files are: a build snapshot's layer, over its artifact. */
export interface BuiltLayers {
  layerOf(snapshotId: string): Promise<{ artifactId: string; envVars: Record<string, string>; ref: LayerRef } | undefined>;
}

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

/** Template operations behind the routes, and the resolver sandbox create uses. */
export class TemplateService {
  readonly resolver: TemplateResolver;

  constructor(private readonly d: TemplateServiceDeps) {
    this.resolver = {
      resolveForCreate: (ref) => this.resolveForCreate(ref),
      idsFor: async (ref) => [(await this.d.templates.resolve(ref))?.template_id ?? ref],
      artifactRef: async (artifactId) => {
        const a = await this.d.artifacts.get(artifactId);
        if (!a || a.status !== 'READY') throw invalidTemplateRequest(`template artifact ${artifactId} is ${a?.status ?? 'gone'}; a sandbox needs a ready one`);
        return artifactRef(this.d.cfg.master.addr, a);
      },
    };
  }

  /** `body` has passed the TemplateCreate schema; parseCreateRequest checks what a schema cannot say. */
  async create(body: TemplateCreate, owner: TemplateOwner = OPERATOR): Promise<JobAccepted> {
    const spec = parseCreateRequest(body, this.d.cfg.svclet_conf);
    const now = Date.now();
    const recipe: BuildRecipe = { source: spec.source, withSvcCa: spec.withSvcCa, diskSizeMB: spec.buildDiskSizeMB };
    const row: TemplateRow = {
      template_id: newTemplateId(), alias: spec.alias, source_kind: spec.sourceKind, source_image_ref: spec.sourceImageRef,
      request_json: JSON.stringify(recipe), spec_hash: spec.specHash, cpu_count: spec.cpuCount, memory_mb: spec.memoryMB,
      disk_size_mb: spec.diskSizeMB, with_cube_ca: spec.withSvcCa ? 1 : 0, latest_job_id: null, artifact_id: null,
      image_info: null, status: 'building', error: null, legacy: 0, layer_snapshot_id: null, start_cmd: spec.startCmd, ready_cmd: spec.readyCmd, runtime: spec.runtime, ...ownerColumns(owner), created_at: now, updated_at: now,
    };
    await this.d.templates.insert(row);
    this.d.logger.info({ templateId: row.template_id, alias: row.alias, source: spec.sourceKind }, 'template created');
    return accepted(row.template_id, await this.d.builds.startBuild(row, 'CREATE'));
  }

  /**
   * The template a builder build of `alias` makes: the one with that alias when the builder made
   * it (a new build of it), else a new one (status building). 409 when an image template has it.
   */
  async forBuild(alias: string, sizes: { cpuCount: number; memoryMB: number }, owner: TemplateOwner = OPERATOR): Promise<TemplateRow> {
    const name = parseAlias(alias);
    if (!name) throw invalidTemplateRequest('name is required');
    const have = await this.d.templates.resolve(name);
    if (have) {
      // Names are one namespace for every team (docs/security.md): another team's is taken.
      if (owner.teamId !== undefined && have.team_id !== owner.teamId) throw conflict(`the template name ${name} is taken: choose another name`);
      if (have.source_kind !== 'builder') throw conflict(`template ${name} was made from an image (svc tpl create); the builder cannot build it: choose another name`);
      await this.d.templates.update(have.template_id, { cpu_count: sizes.cpuCount, memory_mb: sizes.memoryMB, ...(have.layer_snapshot_id ? {} : { status: 'building', error: null }) });
      return { ...have, cpu_count: sizes.cpuCount, memory_mb: sizes.memoryMB };
    }
    const now = Date.now();
    const row: TemplateRow = {
      template_id: newTemplateId(), alias: name, source_kind: 'builder', source_image_ref: '', request_json: null, spec_hash: '',
      cpu_count: sizes.cpuCount, memory_mb: sizes.memoryMB, disk_size_mb: this.d.cfg.svclet_conf.default_disk_size_mb, with_cube_ca: 0,
      latest_job_id: null, artifact_id: null, image_info: null, status: 'building', error: null, legacy: 0,
      layer_snapshot_id: null, start_cmd: null, ready_cmd: null, runtime: null, ...ownerColumns(owner), created_at: now, updated_at: now,
    };
    await this.d.templates.insert(row);
    this.d.logger.info({ templateId: row.template_id, alias: name }, 'template created for the builder');
    return row;
  }

  /**
   * The template a builder build `fromImage` starts from: one of the same image (and platform,
   * disk size) that has not failed, else a new unnamed one, built as `svc tpl create --image` does.
   */
  async imageTemplate(image: string, auth?: { username: string; password: string }): Promise<string> {
    const body: TemplateCreate = { image, ...(auth ? { registry_auth: auth } : {}) };
    const spec = parseCreateRequest(body, this.d.cfg.svclet_conf);
    const have = await this.d.templates.bySpecHash(spec.specHash);
    if (have) return have.template_id;
    return (await this.create(body)).template_id;
  }

  /** Where a template's build stands (the builder waits for an image base). */
  async buildState(templateId: string): Promise<{ status: string; error: string | null } | undefined> {
    const t = await this.d.templates.get(templateId);
    return t ? { status: t.status, error: t.error } : undefined;
  }

  async idOf(ref: string): Promise<string | undefined> {
    return (await this.d.templates.resolve(ref))?.template_id;
  }

  /** A builder build finished: the template starts from its snapshot from now on. */
  async builderBuilt(templateId: string, r: { snapshotId: string; startCmd: string | null; readyCmd: string | null; user: string; workdir?: string }): Promise<void> {
    // The user and working directory the steps left, where an image keeps them (ImageInfo).
    const info: ImageInfo = { layers: 0, sizeBytes: 0, user: r.user, ...(r.workdir ? { workingDir: r.workdir } : {}) };
    await this.d.templates.update(templateId, {
      layer_snapshot_id: r.snapshotId, start_cmd: r.startCmd, ready_cmd: r.readyCmd, image_info: JSON.stringify(info), status: 'ready', error: null,
    });
  }

  /** A builder build failed: a template that had a good build keeps it; one that never had fails. */
  async builderFailed(templateId: string, error: string): Promise<void> {
    const t = await this.d.templates.get(templateId);
    if (t && !t.layer_snapshot_id) await this.d.templates.update(templateId, { status: 'failed', error });
  }

  /** A team's templates and the public ones (undefined: every template, the operator's view). */
  async list(caller?: string): Promise<TemplateInfo[]> {
    const rows = await this.d.templates.list();
    return rows.filter((t) => caller === undefined || t.team_id === caller || Number(t.public) === 1).map(toTemplateInfo);
  }

  /** Whose the template a build job builds is; undefined when there is no such job. */
  async ownerOfJob(jobId: string): Promise<Owner | undefined> {
    const j = await this.d.jobs.get(jobId);
    const t = j && await this.d.templates.get(j.template_id);
    return t ? ownerOf(t) : undefined;
  }

  /** Whose the template `ref` (id, alias, or `name:tag`) is; undefined when none is called so. */
  async ownerOfRef(ref: string): Promise<Owner | undefined> {
    const t = await this.d.templates.resolve(ref.split(':', 1)[0]!);
    return t ? ownerOf(t) : undefined;
  }

  async get(ref: string): Promise<TemplateInfo> {
    return toTemplateInfo(await this.row(ref));
  }

  /** By id or alias; 404 code 130404 when neither matches. */
  async row(ref: string | null | undefined): Promise<TemplateRow> {
    if (!ref) throw templateIdRequired();
    const t = await this.d.templates.resolve(ref);
    if (!t) throw templateNotFound(ref);
    return t;
  }

  /** Absent, null or "" clears the alias. */
  async setAlias(ref: string, alias: string | null | undefined): Promise<TemplateInfo> {
    const t = await this.row(ref);
    await this.d.templates.setAlias(t.template_id, parseAlias(alias));
    return this.get(t.template_id);
  }

  /**
   * Deletes the template. Sandboxes created from it keep running: its definitions stay (superseded)
   * until they are gone, so their artifact is kept; otherwise the artifacts it owned are deleted now.
   */
  async delete(ref: string): Promise<void> {
    const t = await this.row(ref);
    const snapshots = await snapshotsOfTemplate(this.d.db, t.template_id);
    if (snapshots.length) throw templateHasSnapshots(ref, snapshots);
    await this.d.builds.abandonFor(t);
    const latest = t.latest_job_id ? await this.d.jobs.get(t.latest_job_id) : undefined;
    const definitions = await this.d.definitions.forTemplate(t.template_id);
    const owned = new Set([t.artifact_id, latest?.artifact_id, ...definitions.map((x) => x.artifact_id)].filter((x): x is string => !!x));
    const buildSnapshots = t.source_kind === 'builder' ? await buildSnapshotsOnlyOf(this.d.db, t) : [];
    await this.d.templates.delete(t.template_id);
    for (const id of buildSnapshots) {
      await this.d.snapshots?.deleteBuildSnapshot(id).catch((err: Error) => this.d.logger.warn({ templateId: t.template_id, snapshotId: id, err: err.message }, 'build snapshot of a deleted template kept'));
    }
    const sandboxes = await liveSandboxCount(this.d.db, t.template_id);
    if (sandboxes > 0) await this.d.definitions.supersedeAll(t.template_id);
    else await this.d.definitions.deleteForTemplate(t.template_id);
    this.d.logger.info({ templateId: t.template_id, liveSandboxes: sandboxes }, 'template deleted');
    for (const artifactId of owned) {
      const outcome = await this.d.cleanup.deleteIfUnreferenced(artifactId).catch((err) => {
        this.d.logger.warn({ artifactId, err: (err as Error).message }, 'artifact cleanup failed; the sweep retries');
        return 'retry';
      });
      if (outcome !== 'deleted') this.d.logger.info({ artifactId, outcome }, 'artifact kept after template delete');
    }
  }

  /**
   * Redo: redistributes a READY artifact (the latest job's, or the current one), or rebuilds from
   * the recorded source. A legacy template fails at once: it has no build recipe.
   */
  async redo(ref: string | null | undefined): Promise<JobAccepted> {
    const t = await this.row(ref);
    if (Number(t.legacy) === 1) {
      const how = t.source_image_ref ? ` (POST /svc/template with "image": "${t.source_image_ref}")` : '';
      return accepted(t.template_id, await this.d.builds.refuse(t, 'REDO',
        `template ${t.template_id} was built by the legacy in-process builder and cannot be redone: recreate it from the source image${how}, ` +
        'or migrate it first (POST /svc/template/migrate, CLI tpl merge)'));
    }
    const latest = t.latest_job_id ? await this.d.jobs.get(t.latest_job_id) : undefined;
    const reusable = await this.reusableArtifact(t, latest);
    if (reusable) return accepted(t.template_id, await this.d.builds.startReuse(t, reusable));
    if (t.request_json) return accepted(t.template_id, await this.d.builds.startBuild(t, 'REDO'));
    return accepted(t.template_id, await this.d.builds.refuse(t, 'REDO',
      `template ${t.template_id} has no reusable artifact and no recorded build source; recreate it from the source image`));
  }

  async job(jobId: string | undefined): Promise<JobInfo> {
    if (!jobId) throw badRequest('job_id is required');
    const j = await this.d.jobs.get(jobId);
    if (!j) throw notFound(`build job ${jobId} not found`);
    const live = ACTIVE.includes(j.status as never) ? await readProgress(this.d.coordination, j.job_id) : null;
    return toJobInfo(j, live);
  }

  jobsOf(templateId: string): Promise<JobRow[]> {
    return this.d.jobs.forTemplate(templateId);
  }

  jobRow(jobId: string): Promise<JobRow | undefined> {
    return this.d.jobs.get(jobId);
  }

  /** Moves a legacy artifact from the master's disk into the template center store (CLI tpl merge). */
  async migrate(ref: string | null | undefined): Promise<TemplateInfo> {
    const t = await this.row(ref);
    if (!t.artifact_id) throw invalidTemplateRequest(`template ${t.template_id} has no artifact to migrate`);
    const a = await this.d.artifacts.get(t.artifact_id);
    if (!a || a.status !== 'READY') throw invalidTemplateRequest(`artifact ${t.artifact_id} of template ${t.template_id} is ${a?.status ?? 'missing'}, not READY`);
    if (a.storage === 'legacy-local') {
      const stored = await this.d.templateCenter.migrate(a.artifact_id, a.location!);
      if (a.sha256 && stored.sha256 !== a.sha256) {
        this.d.logger.warn({ artifactId: a.artifact_id, recorded: a.sha256, stored: stored.sha256 }, 'migrated artifact has another sha256 than recorded; keeping the stored one');
      }
      await this.d.artifacts.update(a.artifact_id, {
        storage: stored.storage, location: stored.location, sha256: stored.sha256, size_bytes: stored.sizeBytes,
        download_url: stored.downloadUrl ?? null, url_expires_at: stored.urlExpiresAt ? Date.parse(stored.urlExpiresAt) || null : null,
      });
      this.d.logger.info({ templateId: t.template_id, artifactId: a.artifact_id, storage: stored.storage }, 'legacy artifact migrated');
    }
    if (Number(t.legacy) === 1) await this.d.templates.update(t.template_id, { legacy: 0 });
    return this.get(t.template_id);
  }

  /** Records a template the legacy in-process builder made (its ext4 file is on the master's disk). */
  async registerLegacy(input: LegacyTemplateInput): Promise<TemplateInfo> {
    const alias = parseAlias(input.alias);
    const defaults = this.d.cfg.svclet_conf;
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
    await this.d.templates.insert(t);
    await this.d.artifacts.insert({
      artifact_id: artifactId, spec_hash: t.spec_hash, sha256: input.sha256, size_bytes: input.sizeBytes, status: 'READY',
      storage: 'legacy-local', location: input.localPath, download_url: null, url_expires_at: null, gc_deadline_at: null,
      created_at: now, updated_at: now,
    });
    await this.d.jobs.insertFinished({
      job_id: jobId, template_id: templateId, kind: 'LEGACY', status: 'BUILT', phase: null,
      request_json: JSON.stringify({ legacy: true, localPath: input.localPath }), source_image_ref: t.source_image_ref,
      spec_hash: t.spec_hash, active_spec_hash: null, artifact_id: artifactId, error: null, progress_json: null,
      image_info: t.image_info, last_progress_at: now, created_at: now, updated_at: now, finished_at: now,
    });
    await this.d.definitions.makeCurrent(templateId, artifactId, jobId);
    return this.get(templateId);
  }

  private async resolveForCreate(ref: string): Promise<ResolvedTemplate> {
    if (ref.includes(':')) return this.resolveTagged(ref);
    let t = await this.d.templates.resolve(ref);
    if (!t) throw templateNotFound(ref);
    if (t.source_kind === 'debian_rootfs') t = await platformTemplateReady(this.d.templates, t, this.d.cfg.master.create_timeout_insec);
    if (t.status === 'ready' && t.layer_snapshot_id) return this.resolveBuilt(t, t.layer_snapshot_id);
    if (t.status !== 'ready' || !t.artifact_id) {
      throw invalidTemplateRequest(`template ${ref} is ${t.status}${t.error ? ` (${t.error})` : ''}; a sandbox needs a ready template`);
    }
    const a = await this.d.artifacts.get(t.artifact_id);
    if (!a || a.status !== 'READY') {
      throw invalidTemplateRequest(`template ${ref} has no ready artifact (${t.artifact_id} is ${a?.status ?? 'missing'}); redo the template`);
    }
    return {
      templateId: t.template_id, alias: t.alias ?? undefined, artifact: artifactRef(this.d.cfg.master.addr, a),
      cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
      ...imageDefaults(t), owner: ownerOf(t), ...runtimeOf(t),
    };
  }

  /** `name:tag`: the build of a template the builder made that the tag names. */
  private async resolveTagged(ref: string): Promise<ResolvedTemplate> {
    const [name, tag] = ref.split(':', 2);
    const t = await this.d.templates.resolve(name);
    const snapshotId = t && await this.d.builder?.snapshotOfTag(t.template_id, tag);
    if (!t || !snapshotId) throw templateNotFound(ref);
    return this.resolveBuilt(t, snapshotId);
  }

  /** A template the builder made: its build snapshot's layer over that snapshot's artifact. */
  private async resolveBuilt(t: TemplateRow, snapshotId: string): Promise<ResolvedTemplate> {
    const layer = await this.d.builtLayers?.layerOf(snapshotId);
    if (!layer) throw invalidTemplateRequest(`template ${t.template_id}: its build's files (${snapshotId}) are gone; build it again`);
    const info = imageInfoOf(t);
    return {
      templateId: t.template_id, alias: t.alias ?? undefined, artifact: await this.resolver.artifactRef(layer.artifactId),
      cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
      envVars: layer.envVars, layer: { snapshotId, ref: layer.ref }, owner: ownerOf(t), ...runtimeOf(t),
      ...(info.user ? { defaultUser: info.user } : {}), ...(info.workingDir ? { defaultWorkdir: info.workingDir } : {}),
      ...startOf(t, info),
    };
  }

  /** READY artifacts a redo may reuse: the latest job's first (a failed distribution), then the current one. */
  private async reusableArtifact(t: TemplateRow, latest: JobRow | undefined): Promise<ArtifactRow | undefined> {
    for (const id of [latest?.artifact_id, t.artifact_id]) {
      if (!id) continue;
      const a = await this.d.artifacts.get(id);
      if (a?.status === 'READY' && a.storage !== 'legacy-local') return a;
    }
    return undefined;
  }
}

function accepted(templateId: string, job: JobRow): JobAccepted {
  return { template_id: templateId, job_id: job.job_id, status: job.status as JobAccepted['status'] };
}

/** The image config a template recorded, read once per resolve; unreadable is none. */
function imageInfoOf(t: TemplateRow): Partial<ImageInfo> {
  if (!t.image_info) return {};
  try { return JSON.parse(t.image_info) as Partial<ImageInfo>; } catch { return {}; }
}

/** What an image template's sandboxes start with: the image config's Env and the template's start command. */
function imageDefaults(t: TemplateRow): Pick<ResolvedTemplate, 'envVars' | 'start'> {
  const info = imageInfoOf(t);
  return { envVars: imageEnv(info), ...startOf(t, info) };
}

/** `KEY=value` pairs of the image config's Env, as a map. */
function imageEnv(info: Partial<ImageInfo>): Record<string, string> {
  const env: unknown = info.env;
  const out: Record<string, string> = {};
  if (!Array.isArray(env)) return out;
  for (const kv of env) {
    if (typeof kv !== 'string') continue;
    const i = kv.indexOf('=');
    if (i > 0) out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

/**
 * Who makes a template: a team (undefined: the operator, on the master's own address, whose
 * templates, svc up's base ones, are public and the default team's). docs/security.md.
 */
export interface TemplateOwner {
  teamId?: string;
}
const OPERATOR: TemplateOwner = {};

function ownerColumns(owner: TemplateOwner): { team_id: string; public: number } {
  return owner.teamId === undefined ? { team_id: DEFAULT_TEAM_ID, public: 1 } : { team_id: owner.teamId, public: 0 };
}

export function ownerOf(t: TemplateRow): Owner {
  return { teamId: t.team_id, public: Number(t.public) === 1 };
}

/** The template's runtime, when it names one (TemplateCreate.runtime). */
function runtimeOf(t: TemplateRow): { runtime?: RuntimeKind } {
  return t.runtime === 'gvisor' || t.runtime === 'microvm' ? { runtime: t.runtime } : {};
}
