import { Slots, unavailable, waitAtMost, type Coordination, type Logger } from '@svc/common';
import type { BuildRequest, JobStatusReport } from '@svc/contracts/template-center';
import type { BuildContext } from './build-context.ts';
import { BuildAbortedError, BuildCancelledError, BuildError, explain } from './build-error.ts';
import { buildArtifact, type BuildResult } from './build-job.ts';
import type { CallbackSender } from './callback-sender.ts';
import { ProgressReporter, type ProgressTiming } from './progress-reporter.ts';
import { SpecDedup } from './spec-dedup.ts';

/** Where builds write and what they read (build-context.ts), and the runner's own wiring. */
export interface JobRunnerOptions extends Pick<BuildContext, 'store' | 'workDir' | 'blobs' | 'caCertPath' | 'registryMirrors' | 'hostRegistries' | 'debianImageDir' | 'maxImageBytes' | 'maxDiskSizeMB'> {
  coordination: Coordination;
  callbacks: CallbackSender;
  logger: Logger;
  /** Builds running at once; more wait their turn (default 2). */
  maxConcurrent?: number;
  /**
   * master.build_timeout_sec in ms: a build still running this long after it got its slot fails
   * (BuildTimeoutError), stops where it is and frees the slot (absent: no deadline).
   */
  buildTimeoutMs?: number;
  /** Distinguishes this process's lease holders from other replicas'. */
  instanceId: string;
  progressTiming?: Partial<ProgressTiming>;
}

/** A build that did not finish within JobRunnerOptions.buildTimeoutMs. */
class BuildTimeoutError extends BuildError {}

interface RunningJob {
  controller: AbortController;
  done: Promise<void>;
}

/**
 * Accepted builds run here in the background, each reporting RUNNING/phase, BUILT or FAILED to
 * the master. A job id submitted again while it runs is the same job (the master may retry a
 * submission whose answer it did not see).
 */
export class JobRunner {
  private readonly jobs = new Map<string, RunningJob>();
  private readonly dedup: SpecDedup<BuildResult>;
  /** Builds running at once (maxConcurrent); the rest wait, the teams (BuildRequest.queue) taking turns. */
  private readonly slots: Slots;
  private closed = false;

  constructor(private readonly o: JobRunnerOptions) {
    this.slots = new Slots(o.maxConcurrent ?? 2);
    this.dedup = new SpecDedup<BuildResult>(o.coordination, o.logger);
  }

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  get activeJobs(): number {
    return this.jobs.size;
  }

  submit(req: BuildRequest): void {
    if (this.closed) throw unavailable('the template center is shutting down', 5);
    if (this.jobs.has(req.jobId)) return;
    const controller = new AbortController();
    const done = this.run(req, controller.signal).finally(() => this.jobs.delete(req.jobId));
    this.jobs.set(req.jobId, { controller, done });
  }

  /**
   * Aborts a job queued or running here: a queued one leaves the queue, a running one stops where
   * it is and removes what it built; either frees its slot and reports FAILED. False when no job
   * of that id is here (finished, never submitted, or another replica's).
   */
  cancel(jobId: string): boolean {
    const job = this.jobs.get(jobId);
    if (!job) return false;
    job.controller.abort(new BuildCancelledError());
    return true;
  }

  /** Stops every job: each removes what it had built so far and does not report BUILT. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.jobs.values()];
    for (const j of all) j.controller.abort(new BuildAbortedError('the template center stopped during the build; submit it again (redo)'));
    await Promise.allSettled(all.map((j) => j.done));
  }

  private async run(req: BuildRequest, signal: AbortSignal): Promise<void> {
    const { logger, callbacks } = this.o;
    const log = logger.child({ jobId: req.jobId, templateId: req.templateId, artifactId: req.artifactId });
    const progress = new ProgressReporter(this.o.coordination, req.jobId, log, this.o.progressTiming);
    const report = (r: JobStatusReport) => { void callbacks.report(req.jobId, r); };
    const started = Date.now();
    progress.start('PULLING', 'queued');
    let outcome = 'failed';
    let release: (() => void) | undefined;
    const deadline = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    try {
      release = await this.slots.acquire(signal, req.queue);
      // Without a deadline a build that hangs (a registry trickling a byte a minute, a stuck
      // mkfs) held its slot for good, and with every slot held no build ran at all.
      const { buildTimeoutMs } = this.o;
      if (buildTimeoutMs) {
        timer = setTimeout(() => deadline.abort(new BuildTimeoutError(`the build did not finish within master.build_timeout_sec (${Math.round(buildTimeoutMs / 1000)} s) and was stopped`)), buildTimeoutMs);
      }
      const buildSignal = AbortSignal.any([signal, deadline.signal]);
      report({ status: 'RUNNING', phase: 'PULLING' });
      progress.setPhase('PULLING');
      const { value, reusedFrom } = await this.dedup.run(req.specHash, `${this.o.instanceId}:${req.jobId}`, () => buildArtifact(req, {
        store: this.o.store,
        workDir: this.o.workDir,
        blobs: this.o.blobs,
        caCertPath: this.o.caCertPath,
        registryMirrors: this.o.registryMirrors,
        hostRegistries: this.o.hostRegistries,
        maxImageBytes: this.o.maxImageBytes,
        maxDiskSizeMB: this.o.maxDiskSizeMB,
        debianImageDir: this.o.debianImageDir,
        logger: log,
        progress,
        signal: buildSignal,
        onPhase: (phase) => { progress.setPhase(phase); report({ status: 'RUNNING', phase }); },
      }), { signal: buildSignal, onWait: (holder) => progress.setMessage(`waiting for the build of the same spec by ${holder.split(':').pop()}`) });
      if (buildSignal.aborted) {
        // Aborted after storeImage's own check: the artifact is whole, and jobs of the same spec
        // waiting on this build (SpecDedup, here or on another replica) have it as theirs already,
        // so it stays; removing it broke their BUILT reports (found reviewing the session's diff).
        if (!reusedFrom) log.warn({ artifactId: value.artifact.artifactId }, 'build aborted after its artifact was stored: the artifact stays in the store (other jobs of its spec may use it)');
        throw buildSignal.reason;
      }
      outcome = reusedFrom ? 'reused' : 'built';
      log.info({ ms: Date.now() - started, reusedFrom, sha256: value.artifact.sha256, sizeBytes: value.artifact.sizeBytes }, reusedFrom ? 'reused the artifact of a concurrent build' : 'build done');
      await callbacks.report(req.jobId, { status: 'BUILT', artifact: value.artifact, imageInfo: value.imageInfo });
    } catch (err) {
      // Past the deadline, or once cancelled, whatever step was under way failed by the abort; the
      // deadline or the cancel is the reason.
      const e = deadline.signal.aborted && !signal.aborted ? deadline.signal.reason as BuildTimeoutError
        : signal.reason instanceof BuildCancelledError ? signal.reason : explain(err, 'building');
      outcome = signal.aborted ? 'aborted' : 'failed';
      log.warn({ ms: Date.now() - started, error: e.message, cause: (e.cause as Error)?.message }, 'build failed');
      if (e instanceof BuildCancelledError) {
        // Sent in the background (retried as any report) so that the slot is free at once: the
        // master failed the job before it cancelled it, so nothing there waits for this report.
        report({ status: 'FAILED', error: e.message });
      } else if (signal.aborted) {
        // One quick attempt: the process is going away; the master's reconciler covers a lost report.
        await waitAtMost(callbacks.report(req.jobId, { status: 'FAILED', error: e.message }), 2000);
      } else {
        await callbacks.report(req.jobId, { status: 'FAILED', error: e.message });
      }
    } finally {
      clearTimeout(timer);
      release?.();
      await progress.stop(outcome);
    }
  }

}
