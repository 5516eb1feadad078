import { newArtifactId, newJobId, notFound, SvcError, UnreachableError, wrapError, type Coordination, type Logger } from '@svc/common';
import type { ArtifactStored, JobPhase, JobStatusReport, TemplateCenterClient } from '@svc/contracts/template-center';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { Distributor } from './distribution.ts';
import { NO_TEMPLATE_NODES } from './errors.ts';
import { progressTime, readProgress } from './progress.ts';
import { buildRequest, recipeOf, redactedRequestJson, type RecipeSealer } from './recipe.ts';
import type { ArtifactStore, DefinitionStore } from './store/artifacts.ts';
import { ACTIVE, type JobStore } from './store/jobs.ts';
import type { TemplateStore } from './store/templates.ts';
import type { ArtifactRow, JobKind, JobRow, TemplateRow } from './tables.ts';

export interface BuildJobsDeps {
  /** Opens a registry's credentials in a template's recipe (recipe.ts). */
  vault?: RecipeSealer;
  templates: TemplateStore;
  jobs: JobStore;
  artifacts: ArtifactStore;
  definitions: DefinitionStore;
  distributor: Distributor;
  nodes: NodeRegistry;
  templateCenter: TemplateCenterClient;
  coordination: Coordination;
  logger: Logger;
  staleAfterMs: number;
}

/** A status report as the callback's schema takes it: a null phase is none. */
type ReceivedReport = Omit<JobStatusReport, 'phase'> & { phase?: JobPhase | null };

/**
 * The build job state machine of docs/design.md, "Build jobs":
 *   none → PENDING (submitted; at most one PENDING/RUNNING job per spec, held by a unique index)
 *   PENDING → RUNNING (callbacks move the phase PULLING, BUILDING, UPLOADING)
 *   RUNNING → BUILT (callback: register the artifact, DISTRIBUTING to every live node, finalize)
 *   RUNNING → FAILED (build failure, no progress past the staleness threshold, zero target nodes,
 *                     distribution failure)
 *   redo → RUNNING/DISTRIBUTING on a reusable READY artifact, or PENDING for a full rebuild.
 * A submit that finds the spec taken joins the active job: its template follows that job and gets
 * the same artifact when it finishes.
 */
export class BuildJobs {
  private readonly inflight = new Set<Promise<void>>();
  private readonly distributing = new Set<string>();

  constructor(private readonly d: BuildJobsDeps) {}

  /** Submits a build of the template's recipe; answers the job the template follows afterwards. */
  async startBuild(t: TemplateRow, kind: JobKind): Promise<JobRow> {
    const recipe = recipeOf(t.request_json!, t.template_id, this.d.vault);
    const now = Date.now();
    const jobId = newJobId();
    const artifactId = newArtifactId();
    // Queued by the template's team: the template center's builds take turns between teams.
    const req = buildRequest(recipe, { jobId, templateId: t.template_id, artifactId, specHash: t.spec_hash, queue: t.team_id });
    await this.d.artifacts.insert({
      artifact_id: artifactId, spec_hash: t.spec_hash, sha256: null, size_bytes: null, status: 'PENDING', storage: null,
      location: null, download_url: null, url_expires_at: null, gc_deadline_at: null, created_at: now, updated_at: now,
    });
    const job = await this.claim(t, newJobRow(t, kind, { job_id: jobId, status: 'PENDING', artifact_id: artifactId, request_json: redactedRequestJson(req) }));
    if (job.job_id !== jobId) {
      await this.d.artifacts.transition(artifactId, ['PENDING'], { status: 'CLEANUP_PENDING' });
      await this.d.artifacts.deleteIfCleanupPending(artifactId);
      return job;
    }
    try {
      await this.d.templateCenter.build(req);
    } catch (err) {
      // The job's error is the team's to read: a template center that did not answer is told in
      // words without its address (UnreachableError's public ones); the log has the address.
      const e = wrapError(err, 'the template center did not accept the build');
      if (e instanceof UnreachableError) this.d.logger.warn({ jobId, err: e.message }, 'the template center did not answer a build request');
      await this.fail(job, e instanceof UnreachableError ? e.publicMessage : e.message);
    }
    return (await this.d.jobs.get(jobId))!;
  }

  /** Redo on an artifact that is still READY: straight to RUNNING/DISTRIBUTING, no build. */
  async startReuse(t: TemplateRow, artifact: ArtifactRow): Promise<JobRow> {
    const row = newJobRow(t, 'REDO', {
      status: 'RUNNING', phase: 'DISTRIBUTING', artifact_id: artifact.artifact_id,
      request_json: JSON.stringify({ reuseArtifactId: artifact.artifact_id }),
    });
    const job = await this.claim(t, row);
    if (job.job_id === row.job_id) this.track(this.distributeAndFinalize(job.job_id));
    return job;
  }

  /** A job that fails as it is submitted (redo of a legacy template, nothing to rebuild from). */
  async refuse(t: TemplateRow, kind: JobKind, error: string): Promise<JobRow> {
    const now = Date.now();
    const job = newJobRow(t, kind, { status: 'FAILED', error, finished_at: now, request_json: JSON.stringify({ refused: true }) });
    await this.d.jobs.insertFinished(job);
    await this.d.templates.update(t.template_id, { latest_job_id: job.job_id, error, status: t.artifact_id ? 'ready' : 'failed' });
    return job;
  }

  /** The template center's status callback (its schema, TEMPLATE_CALLBACK_ROUTES.status, checked the report). */
  async onReport(jobId: string, report: ReceivedReport): Promise<void> {
    const job = await this.d.jobs.get(jobId);
    if (!job) throw notFound(`build job ${jobId} not found`);
    if (job.status === 'BUILT' || job.status === 'FAILED') {
      // A build that outlived its job (reconciled as stale, template deleted): keep the artifact known,
      // so a redo can reuse it or the GC sweep can remove it.
      if (report.status === 'BUILT' && report.artifact) await this.register(job, report.artifact).catch((err: Error) => this.d.logger.warn({ jobId: job.job_id, err: err.message }, 'registering a built artifact failed; the job stays unfinished and is retried'));
      return;
    }
    const now = Date.now();
    switch (report.status) {
      case 'PENDING':
        await this.d.jobs.touch(jobId, now);
        return;
      case 'RUNNING': {
        if (job.phase === 'DISTRIBUTING' || !report.phase || report.phase === 'DISTRIBUTING') {
          await this.d.jobs.touch(jobId, now);
          if (job.status === 'PENDING') await this.d.jobs.transition(jobId, ['PENDING'], { status: 'RUNNING' });
          return;
        }
        await this.d.jobs.transition(jobId, ACTIVE, { status: 'RUNNING', phase: report.phase, last_progress_at: now });
        if (job.artifact_id && (report.phase === 'BUILDING' || report.phase === 'UPLOADING')) {
          await this.d.artifacts.transition(job.artifact_id, ['PENDING'], { status: 'BUILDING' });
        }
        return;
      }
      case 'FAILED':
        await this.fail(job, report.error?.trim() || 'the template center reported a failed build without a reason');
        return;
      case 'BUILT':
        await this.onBuilt(job, report);
        return;
    }
  }

  /**
   * Fails active jobs without progress (job updates and the template center's progress key)
   * past the staleness threshold, and settles templates left behind by a crash.
   */
  async reconcile(now = Date.now()): Promise<string[]> {
    const cutoff = now - this.d.staleAfterMs;
    const failed: string[] = [];
    for (const job of await this.d.jobs.staleActive(cutoff)) {
      if (this.distributing.has(job.job_id)) {
        await this.d.jobs.touch(job.job_id, now);
        continue;
      }
      const seen = progressTime(await readProgress(this.d.coordination, job.job_id, this.d.logger));
      if (seen > cutoff) {
        await this.d.jobs.touch(job.job_id, seen);
        continue;
      }
      const idleSec = Math.round((now - Math.max(Number(job.last_progress_at), seen)) / 1000);
      const reason = `no progress for ${idleSec} s (over the ${Math.round(this.d.staleAfterMs / 1000)} s threshold): ` +
        'the build state was lost, for example after a template center restart; retry with redo';
      if (await this.fail(job, reason, Number(job.last_progress_at))) failed.push(job.job_id);
    }
    for (const t of await this.d.templates.unsettled()) await this.settle(t.template_id);
    return failed;
  }

  /**
   * Ends the template's own build when the template goes and nothing else waits for it, and asks
   * the template center to cancel it: the job would otherwise hold one of its slots until it
   * ends, up to master.build_timeout_sec.
   */
  async abandonFor(t: TemplateRow): Promise<void> {
    if (!t.latest_job_id) return;
    const job = await this.d.jobs.get(t.latest_job_id);
    if (!job || !ACTIVE.includes(job.status as never)) return;
    const others = (await this.d.templates.followers(job.job_id)).filter((x) => x.template_id !== t.template_id);
    if (others.length) return;
    // Failed first: the FAILED report the cancel brings then finds the job ended and changes nothing.
    if (!(await this.fail(job, `template ${t.template_id} was deleted during the build`))) return;
    // Distributing, the template center's part is done (a reuse never had one).
    if (job.phase === 'DISTRIBUTING') return;
    await this.cancel(job);
  }

  /** Best effort: a template center that does not answer leaves the build to its deadline; the delete goes on. */
  private async cancel(job: JobRow): Promise<void> {
    try {
      const { cancelled } = await this.d.templateCenter.cancelBuild(job.job_id);
      this.d.logger.info({ jobId: job.job_id, templateId: job.template_id, cancelled }, cancelled ? 'template center build cancelled' : 'template center had no such build to cancel (finished or lost)');
    } catch (err) {
      this.d.logger.warn({ jobId: job.job_id, templateId: job.template_id, err: (err as Error).message }, 'the template center did not cancel the build of a deleted template; it runs until it ends or reaches master.build_timeout_sec');
    }
  }

  /** Waits for background distributions (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.inflight.size) await Promise.allSettled([...this.inflight]);
  }

  /** Applies the template's latest job outcome to it, when that job has finished. */
  async settle(templateId: string): Promise<void> {
    const t = await this.d.templates.get(templateId);
    if (!t?.latest_job_id) return;
    const job = await this.d.jobs.get(t.latest_job_id);
    if (job?.status === 'BUILT' && job.artifact_id) await this.applyBuilt(t, job);
    else if (job?.status === 'FAILED') await this.applyFailed(t, job.job_id, job.error ?? 'build failed');
  }

  private async onBuilt(job: JobRow, report: ReceivedReport): Promise<void> {
    const stored = report.artifact!;
    const problem = await this.register(job, stored);
    if (problem) {
      await this.fail(job, problem);
      return;
    }
    const progress = await readProgress(this.d.coordination, job.job_id, this.d.logger);
    const moved = await this.d.jobs.startDistributing(job.job_id, {
      artifact_id: stored.artifactId,
      image_info: report.imageInfo ? JSON.stringify(report.imageInfo) : null,
      ...(progress ? { progress_json: JSON.stringify(progress) } : {}),
    });
    if (moved) this.track(this.distributeAndFinalize(job.job_id));
  }

  /** Records the stored artifact as READY; answers why not when it cannot be used. */
  private async register(job: JobRow, stored: ArtifactStored): Promise<string | null> {
    const now = Date.now();
    const fields = {
      sha256: stored.sha256, size_bytes: stored.sizeBytes, storage: stored.storage, location: stored.location,
      download_url: stored.downloadUrl ?? null, url_expires_at: stored.urlExpiresAt ? Date.parse(stored.urlExpiresAt) || null : null,
      gc_deadline_at: null,
    };
    const existing = await this.d.artifacts.get(stored.artifactId);
    if (!existing) {
      await this.d.artifacts.insert({ artifact_id: stored.artifactId, spec_hash: job.spec_hash, status: 'READY', ...fields, created_at: now, updated_at: now });
      return null;
    }
    if (await this.d.artifacts.transition(stored.artifactId, ['PENDING', 'BUILDING', 'READY'], { ...fields, status: 'READY' })) return null;
    return `artifact ${stored.artifactId} reported by the template center is being deleted; redo the template`;
  }

  private async distributeAndFinalize(jobId: string): Promise<void> {
    this.distributing.add(jobId);
    const beatMs = Math.max(1_000, Math.min(30_000, Math.floor(this.d.staleAfterMs / 3)));
    const beat = setInterval(() => { this.d.jobs.touch(jobId, Date.now()).catch((err: Error) => this.d.logger.warn({ jobId, err: err.message }, 'job heartbeat failed')); }, beatMs);
    beat.unref();
    let job: JobRow | undefined;
    try {
      job = await this.d.jobs.get(jobId);
      if (!job || job.status !== 'RUNNING') return;
      const artifact = job.artifact_id ? await this.d.artifacts.get(job.artifact_id) : undefined;
      if (!artifact || artifact.status !== 'READY') {
        await this.fail(job, `artifact ${job.artifact_id} is ${artifact?.status ?? 'gone'}, not READY; redo the template to rebuild it`);
        return;
      }
      const targets = await this.d.nodes.liveNodeIds();
      if (targets.length === 0) {
        await this.fail(job, NO_TEMPLATE_NODES);
        return;
      }
      const r = await this.d.distributor.toNodes(artifact, targets, () => { this.d.jobs.touch(jobId, Date.now()).catch((err: Error) => this.d.logger.warn({ jobId, err: err.message }, 'job heartbeat failed')); });
      if (r.failed.length) {
        const detail = r.failed.map((f) => `${f.nodeId}: ${f.message}`).join('; ');
        await this.fail(job, `distribution failed on ${r.failed.length} of ${targets.length} node(s) (${detail}); ` +
          'the artifact is kept and a redo distributes it again');
        return;
      }
      if (!(await this.d.jobs.transition(jobId, ['RUNNING'], { status: 'BUILT' }))) return;
      const built = (await this.d.jobs.get(jobId))!;
      for (const t of await this.d.templates.followers(jobId)) await this.applyBuilt(t, built);
    } catch (err) {
      this.d.logger.error({ jobId, err: (err as Error).message }, 'template distribution failed');
      if (job) await this.fail(job, `distribution failed: ${(err as Error).message}`).catch((e: Error) => this.d.logger.error({ jobId, err: e.message }, 'could not mark a job failed after its distribution failed'));
    } finally {
      clearInterval(beat);
      this.distributing.delete(jobId);
    }
  }

  /** Moves an active job to FAILED (optionally only while its progress clock is `clock`). */
  private async fail(job: JobRow, error: string, clock?: number): Promise<boolean> {
    const progress = await readProgress(this.d.coordination, job.job_id, this.d.logger);
    const moved = await this.d.jobs.transition(job.job_id, ACTIVE, {
      status: 'FAILED', error, ...(progress ? { progress_json: JSON.stringify(progress) } : {}),
    }, clock);
    if (!moved) return false;
    this.d.logger.warn({ jobId: job.job_id, templateId: job.template_id, error }, 'template build job failed');
    for (const t of await this.d.templates.followers(job.job_id)) await this.applyFailed(t, job.job_id, error);
    return true;
  }

  private async applyBuilt(t: TemplateRow, job: JobRow): Promise<void> {
    if (t.latest_job_id !== job.job_id) return;
    await this.d.definitions.makeCurrent(t.template_id, job.artifact_id!, job.job_id);
    await this.d.templates.updateIfFollowing(t.template_id, job.job_id, {
      artifact_id: job.artifact_id, status: 'ready', error: null, image_info: job.image_info ?? t.image_info,
    });
  }

  private async applyFailed(t: TemplateRow, jobId: string, error: string): Promise<void> {
    await this.d.templates.updateIfFollowing(t.template_id, jobId, { status: t.artifact_id ? 'ready' : 'failed', error });
  }

  /**
   * Takes the spec's active slot for `row`, or joins the job that holds it. The template then
   * follows whichever job that is.
   */
  private async claim(t: TemplateRow, row: JobRow): Promise<JobRow> {
    for (let attempt = 0; attempt < 10; attempt++) {
      if (await this.d.jobs.tryInsertActive(row)) {
        await this.follow(t.template_id, row.job_id);
        return row;
      }
      const winner = await this.d.jobs.activeForSpec(row.spec_hash);
      if (!winner) continue; // finished between the insert and the read: try again
      await this.follow(t.template_id, winner.job_id);
      await this.settle(t.template_id); // the winner may have finished meanwhile
      this.d.logger.info({ templateId: t.template_id, jobId: winner.job_id }, 'build of the same spec already active: joined it');
      return (await this.d.jobs.get(winner.job_id))!;
    }
    throw new SvcError(503, 'the build slot of this template spec is changing hands; retry', { headers: { 'Retry-After': '1' } });
  }

  private async follow(templateId: string, jobId: string): Promise<void> {
    const t = await this.d.templates.get(templateId);
    if (!t) return;
    await this.d.templates.update(templateId, { latest_job_id: jobId, error: null, status: t.artifact_id ? 'ready' : 'building' });
  }

  private track(p: Promise<void>): void {
    const tracked = p.catch((err) => this.d.logger.error({ err: (err as Error).message }, 'template pipeline error'))
      .finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }
}

function newJobRow(t: TemplateRow, kind: JobKind, fields: Partial<JobRow>): JobRow {
  const now = Date.now();
  return {
    job_id: newJobId(), template_id: t.template_id, kind, status: 'PENDING', phase: null, request_json: '{}',
    source_image_ref: t.source_image_ref, spec_hash: t.spec_hash, active_spec_hash: null, artifact_id: null, error: null,
    progress_json: null, image_info: null, last_progress_at: now, created_at: now, updated_at: now, finished_at: null,
    ...fields,
  };
}

