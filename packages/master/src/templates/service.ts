import type { Kysely } from 'kysely';
import { badRequest, conflict, forbidden, newTemplateId, notFound, type Coordination, type Logger, type SvcConfig } from '@svc/common';
import type { ImageInfo, TemplateCenterClient } from '@svc/contracts/template-center';
import { hostFileSourceOf, type JobAccepted, type JobInfo, type TemplateCreate, type TemplateInfo } from '@svc/contracts/template-routes';
import type { Database } from '../db/schema.ts';
import type { TemplateResolver } from '../sandboxes/ports.ts';
import type { Owner } from '../teams/ownership.ts';
import { parseAlias } from './alias.ts';
import type { BuildJobs } from './build-jobs.ts';
import type { BuilderStatus } from './builder-port.ts';
import type { ArtifactCleanup } from './cleanup.ts';
import { parseCreateRequest } from './create-request.ts';
import { invalidTemplateRequest, templateHasSnapshots, templateIdRequired, templateNotFound } from './errors.ts';
import { migrateLegacyTemplate, registerLegacyTemplate, type LegacyTemplateInput } from './legacy-templates.ts';
import { readProgress } from './progress.ts';
import { storedRecipe, type BuildRecipe, type RecipeSealer } from './recipe.ts';
import { toJobInfo, toTemplateInfo } from './render.ts';
import { buildSnapshotsOnlyOf, liveSandboxCount, snapshotsOfTemplate, type ArtifactStore, type DefinitionStore } from './store/artifacts.ts';
import { SnapshotRepo } from '../snapshots/repo.ts';
import { ACTIVE, type JobStore } from './store/jobs.ts';
import type { TemplateStore } from './store/templates.ts';
import type { ArtifactRow, JobRow, TemplateRow } from './tables.ts';
import { OPERATOR, ownerColumns, ownerOf, type TemplateOwner } from './template-owner.ts';
import { templateResolver, type BuiltLayers } from './template-resolver.ts';

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
  /** Seals a registry's credentials in the recipe a template keeps (recipe.ts); absent: kept as they are (unit tests). */
  vault?: RecipeSealer;
  /** The builder's tags (a create of `name:tag`). */
  builder?: Pick<BuilderStatus, 'snapshotOfTag'>;
  /** A team's builds at once (maxConcurrentBuilds); absent: no limit. */
  teamBuilds?: TeamBuildAdmission;
}

/** Where a team's build is let start, or refused with a 429 (builds/team-builds.ts). */
export interface TeamBuildAdmission {
  admit<T>(teamId: string, start: () => Promise<T>): Promise<T>;
}

/** Template operations behind the routes, and the resolver sandbox create uses. */
export class TemplateService {
  readonly resolver: TemplateResolver;

  constructor(private readonly d: TemplateServiceDeps) {
    this.resolver = templateResolver(d);
  }

  /**
   * `body` has passed the TemplateCreate schema; parseCreateRequest checks what a schema cannot
   * say. A team's create is one of its builds at once (maxConcurrentBuilds): 429 past it.
   */
  async create(body: TemplateCreate, owner: TemplateOwner = OPERATOR): Promise<JobAccepted> {
    return this.asBuildOf(owner.teamId, () => this.make(body, owner));
  }

  /** The operator's builds count against no team; so does none without a limit. */
  private asBuildOf<T>(teamId: string | undefined, start: () => Promise<T>): Promise<T> {
    return teamId !== undefined && this.d.teamBuilds ? this.d.teamBuilds.admit(teamId, start) : start();
  }

  private async make(body: TemplateCreate, owner: TemplateOwner): Promise<JobAccepted> {
    // Files on the platform's host, which the template center reads as root: the operator's
    // alone. The gateway refuses a team's key first (docs/security.md); the master holds to it too.
    const fileSource = hostFileSourceOf(body);
    if (fileSource && owner.teamId !== undefined) throw forbidden(`templates made from files on the platform's host (${fileSource}) are the operator's`);
    const spec = parseCreateRequest(body, this.d.cfg.svclet_conf, ownerColumns(owner).team_id);
    if (spec.alias) await this.refuseSnapshotName(spec.alias);
    const now = Date.now();
    const recipe: BuildRecipe = { source: spec.source, withSvcCa: spec.withSvcCa, diskSizeMB: spec.buildDiskSizeMB };
    const templateId = newTemplateId();
    const row: TemplateRow = {
      template_id: templateId, alias: spec.alias, source_kind: spec.sourceKind, source_image_ref: spec.sourceImageRef,
      request_json: storedRecipe(recipe, templateId, this.d.vault), spec_hash: spec.specHash, cpu_count: spec.cpuCount, memory_mb: spec.memoryMB,
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
    await this.refuseSnapshotName(name);
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
   * disk size) that has not failed and that the build's team may use, else a new unnamed one of
   * that team, built as `svc tpl create --image` does. It was the operator's, public, and found
   * by image alone: a team's private image, pulled with its credentials, was listed to every team
   * and handed to any build naming it without them.
   */
  async imageTemplate(image: string, auth: { username: string; password: string } | undefined, requester: { teamId: string }): Promise<string> {
    const body: TemplateCreate = { image, ...(auth ? { registry_auth: auth } : {}) };
    const spec = parseCreateRequest(body, this.d.cfg.svclet_conf, requester.teamId);
    const have = await this.d.templates.bySpecHash(spec.specHash, requester.teamId);
    if (have) return have.template_id;
    // Not admitted again: it is part of a builder build the team's limit let start.
    return (await this.make(body, requester)).template_id;
  }

  /** Where a template's build stands (the builder waits for an image base). */
  async buildState(templateId: string): Promise<{ status: string; error: string | null } | undefined> {
    const t = await this.d.templates.get(templateId);
    return t ? { status: t.status, error: t.error } : undefined;
  }

  /** The team a template is of (the default team for the operator's), for files uploaded to it. */
  async teamOf(ref: string): Promise<string | undefined> {
    return (await this.d.templates.resolve(ref))?.team_id;
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

  /** By id or alias; 404 with code ErrorCodes.templateNotFound when neither matches. */
  async row(ref: string | null | undefined): Promise<TemplateRow> {
    if (!ref) throw templateIdRequired();
    const t = await this.d.templates.resolve(ref);
    if (!t) throw templateNotFound(ref);
    return t;
  }

  /** Absent, null or "" clears the alias. */
  async setAlias(ref: string, alias: string | null | undefined): Promise<TemplateInfo> {
    const t = await this.row(ref);
    const name = parseAlias(alias);
    if (name) await this.refuseSnapshotName(name);
    await this.d.templates.setAlias(t.template_id, name);
    return this.get(t.template_id);
  }

  /**
   * A user's snapshot's name or id is taken for templates too, whoever's it is: names are one
   * namespace for every team, and templates are looked up first (docs/security.md), so a template
   * given another team's snapshot name would hide that snapshot from its team.
   */
  private async refuseSnapshotName(name: string): Promise<void> {
    if (await new SnapshotRepo(this.d.db).resolve(name)) throw conflict(`the name ${name} is a snapshot's: choose another name`);
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
    if (t.request_json) {
      const owner = ownerOf(t);
      return accepted(t.template_id, await this.asBuildOf(owner.public ? undefined : owner.teamId, () => this.d.builds.startBuild(t, 'REDO')));
    }
    return accepted(t.template_id, await this.d.builds.refuse(t, 'REDO',
      `template ${t.template_id} has no reusable artifact and no recorded build source; recreate it from the source image`));
  }

  async job(jobId: string | undefined): Promise<JobInfo> {
    if (!jobId) throw badRequest('job_id is required');
    const j = await this.d.jobs.get(jobId);
    if (!j) throw notFound(`build job ${jobId} not found`);
    const live = ACTIVE.includes(j.status as never) ? await readProgress(this.d.coordination, j.job_id, this.d.logger) : null;
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
    await migrateLegacyTemplate(this.d, t);
    return this.get(t.template_id);
  }

  /** Records a template the legacy in-process builder made (its ext4 file is on the master's disk). */
  async registerLegacy(input: LegacyTemplateInput): Promise<TemplateInfo> {
    return this.get(await registerLegacyTemplate(this.d, input));
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
