import { toSvcError, type Logger } from '@svc/common';
import type { CreateSandboxInput } from '@svc/contracts/master';
import type { E2bBuildStart } from '@svc/contracts/template-routes';
import type { ResolvedTemplate, TemplateResolver } from '../sandboxes/ports.ts';
import { startAndWaitReady } from '../sandboxes/start-command.ts';
import { usableBy } from '../teams/ownership.ts';
import { cachedPrefix, cacheKeys, capturesFiles, type CacheKeys } from './build-cache.ts';
import { openBuildLog, type BuildLog } from './build-log.ts';
import { DEFAULT_TAG, type BaseSpec, type Step } from './build-spec.ts';
import { BuildSlots } from './build-slots.ts';
import type { BuildFiles, BuildNodes, BuildSandboxes, BuildSnapshots, BuilderTemplates } from './ports.ts';
import type { BuildRepo } from './repo.ts';
import { runStep, StepFailed } from './run-step.ts';
import { applyStep, startState } from './step-state.ts';
import type { BuildRow } from './tables.ts';
import { TemplateWatch } from './template-watch.ts';

/** A whole build's limit unless the master is told otherwise (master.build_timeout_sec). */
const BUILD_TIMEOUT_MS = 3600_000;
/** A build sandbox lives at most this long (it is killed when the build ends). */
const BUILD_SANDBOX_TIMEOUT_SEC = 2 * 3600;
/** How long a build waits for the template of its `fromImage` (a pull and an ext4 build). */
const IMAGE_BASE_LIMIT_MS = 20 * 60_000;
const IMAGE_POLL_MS = 1_000;

export interface BuildRunnerDeps {
  repo: BuildRepo;
  templates: BuilderTemplates;
  /** The master's resolver: templates (the builder's too) and snapshots. */
  resolver: TemplateResolver;
  sandboxes: BuildSandboxes;
  snapshots: BuildSnapshots;
  nodes: BuildNodes;
  /** Context files of COPY steps (context-files.ts). */
  files: BuildFiles;
  logger: Logger;
  /** Builds that run their steps at once on this master; more wait, the teams taking turns (default 2). */
  maxConcurrent?: number;
  /** A build still running after this long fails and its sandbox is killed (default an hour). */
  timeoutMs?: number;
  /** How often a running build asks whether its template still exists (template-watch.ts; default 5 s). */
  templateCheckMs?: number;
}

/**
 * One build from its start to its outcome: the base (an image pulled as a template first), the
 * cache, the steps in a sandbox of the base (in one of the master's build slots), the captures,
 * and the outcome recorded on the build and its template.
 */
export class BuildRunner {
  private readonly slots: BuildSlots;

  constructor(private readonly d: BuildRunnerDeps) {
    this.slots = new BuildSlots(Math.max(1, d.maxConcurrent ?? 2));
  }

  async run(b: BuildRow, baseSpec: BaseSpec, spec: E2bBuildStart): Promise<void> {
    const log = openBuildLog(this.d.repo, b.build_id);
    const steps = spec.steps ?? [];
    try {
      const baseRef = baseSpec.kind === 'template' ? baseSpec.ref : await this.imageBase(baseSpec, b.team_id, log);
      await log('info', `Building from ${baseSpec.kind === 'template' ? baseRef : baseSpec.image}: ${steps.length} step(s)`);
      const base = await this.d.resolver.resolveForCreate(baseRef, b.team_id).catch((err) => {
        throw new StepFailed('base', `the base ${baseRef} cannot be used: ${toSvcError(err).message}`);
      });
      // Another team's private template is no base (docs/security.md): it is reported as not found.
      if (base.owner && !usableBy(b.team_id, base.owner)) throw new StepFailed('base', `the base ${baseRef} cannot be used: template ${baseRef} not found`);
      const keys = cacheKeys(base, steps, spec, b.team_id);
      const forcedFrom = spec.force ? 0 : steps.findIndex((s) => s.force);
      const whole = forcedFrom === -1 ? await this.d.snapshots.byCacheKey(keys.final) : undefined;
      let snapshotId: string;
      if (whole) {
        await log('info', 'Every step is cached from an earlier build: nothing to run');
        snapshotId = whole.snapshot_id;
      } else {
        const resume = await cachedPrefix(this.d.snapshots, steps, keys.steps, forcedFrom === -1 ? steps.length : forcedFrom);
        snapshotId = await this.slots.inSlot(b.team_id, log, () => this.runSteps(b, base, steps, { keys, resume }, spec, log, Date.now() + (this.d.timeoutMs ?? BUILD_TIMEOUT_MS)));
      }
      const { user, workdir } = steps.reduce(applyStep, startState(base));
      await this.d.templates.builderBuilt(b.template_id, { snapshotId, startCmd: spec.startCmd ?? null, readyCmd: spec.readyCmd ?? null, user, ...(workdir ? { workdir } : {}) });
      await log('info', 'Build finished');
      await this.d.repo.transition(b.build_id, 'building', { status: 'ready', snapshot_id: snapshotId });
      await this.d.repo.setTags(b.template_id, b.build_id, [DEFAULT_TAG, ...(b.tags ? JSON.parse(b.tags) as string[] : [])]);
    } catch (err) {
      const step = err instanceof StepFailed ? err.step : 'finalize';
      const message = err instanceof StepFailed ? err.message : `the build failed: ${toSvcError(err).message}`;
      await log('error', message).catch((e: Error) => this.d.logger.warn({ buildId: b.build_id, err: e.message }, 'build log line not written'));
      await this.d.repo.transition(b.build_id, 'building', { status: 'error', reason: JSON.stringify({ message, step }) });
      await this.d.templates.builderFailed(b.template_id, message);
    }
  }

  /** An image base: its template (made, or one made before), once its pull and build are done. */
  private async imageBase(base: Extract<BaseSpec, { kind: 'image' }>, teamId: string, log: BuildLog): Promise<string> {
    await log('info', `Base image ${base.image}: pulling it as a template`);
    const id = await this.d.templates.imageTemplate(base.image, base.auth, { teamId }).catch((err) => {
      throw new StepFailed('base', `the image ${base.image} cannot be used: ${toSvcError(err).message}`);
    });
    const until = Date.now() + IMAGE_BASE_LIMIT_MS;
    let said = Date.now();
    for (;;) {
      const state = await this.d.templates.buildState(id);
      if (!state) throw new StepFailed('base', `the template ${id} of image ${base.image} was deleted`);
      if (state.status === 'ready') break;
      if (state.status === 'failed') throw new StepFailed('base', `the image ${base.image} could not be made a template: ${state.error ?? 'its build failed'}`);
      if (Date.now() > until) throw new StepFailed('base', `the image ${base.image} was not ready after ${IMAGE_BASE_LIMIT_MS / 60_000} minutes`);
      // A line a minute keeps the abandoned-build sweep away while a large image is pulled.
      if (Date.now() - said > 60_000) { said = Date.now(); await log('info', `Still pulling ${base.image} (template ${id})`); }
      await new Promise((r) => setTimeout(r, IMAGE_POLL_MS));
    }
    await log('info', `Base image ${base.image} is template ${id}`);
    return id;
  }

  /**
   * Runs the steps in a sandbox of the base, or of the cached capture of the first steps, and
   * captures its files after each step that changes them (the next build's cache) and at the
   * end; the sandbox is then killed.
   */
  private async runSteps(
    b: BuildRow, base: ResolvedTemplate, steps: Step[], cache: { keys: CacheKeys; resume?: { after: number; snapshotId: string } },
    spec: E2bBuildStart, log: BuildLog, deadline: number,
  ): Promise<string> {
    const input: CreateSandboxInput = {
      template: base.templateId, timeout: BUILD_SANDBOX_TIMEOUT_SEC, onTimeout: 'kill', autoResume: false,
      // Secured and private: the steps run through the node agent, and a build sandbox's id is in
      // its log, which any team reads for a public template (until 2026-11-30 anyone who read it
      // could write into that template's build through envd).
      metadata: { 'svc.build': b.build_id }, envVars: {}, secure: true,
      network: { allowOut: [], denyOut: [], allowPublicTraffic: false }, volumeMounts: [],
      cpuCount: Number(b.cpu_count), memoryMB: Number(b.memory_mb),
    };
    // A built base's start command is not the build's: the build runs its own at the end.
    const { start: _baseStart, ...plainBase } = base;
    // A cached capture holds every file change since the base's artifact: it replaces the base's layer.
    const layer = cache.resume && await this.d.snapshots.layerOf(cache.resume.snapshotId);
    if (cache.resume && !layer) await log('warn', `The cached files of the first ${cache.resume.after} step(s) are gone (deleted meanwhile): every step runs`);
    const resume = layer ? cache.resume : undefined;
    const from: ResolvedTemplate = layer && resume ? { ...plainBase, layer: { snapshotId: resume.snapshotId, ref: layer.ref } } : plainBase;
    const deleted = () => new StepFailed('base', `template ${b.template_id} was deleted during the build`);
    const exists = async () => (await this.d.templates.buildState(b.template_id)) !== undefined;
    // A build queued behind others may find its template gone when its turn comes.
    if (!(await exists())) throw deleted();
    const sbx = await this.d.sandboxes.create(input, from).catch((err) => {
      throw new StepFailed('base', `no sandbox of the ${resume ? 'cached steps' : 'base'} could start: ${toSvcError(err).message}`);
    });
    const watch = new TemplateWatch(exists, () => {
      void log('warn', `Template ${b.template_id} was deleted: the build stops`).catch(() => { /* its template is gone: the log may be too */ });
      this.d.sandboxes.kill(sbx.sandboxId).catch((err: Error) => this.d.logger.warn({ buildId: b.build_id, sandboxId: sbx.sandboxId, err: err.message }, 'build sandbox of a deleted template not killed; its timeout ends it'));
    }, this.d.logger, this.d.templateCheckMs).start();
    try {
      return await this.stepsIn(sbx, b, base, steps, { keys: cache.keys, resume }, spec, log, deadline, watch);
    } catch (err) {
      // The step the kill ended failed for that reason, whatever its own error says.
      if (watch.gone && !(err instanceof StepFailed && err.message.endsWith('was deleted during the build'))) throw deleted();
      throw err;
    } finally {
      watch.stop();
      await this.d.sandboxes.kill(sbx.sandboxId).catch((err: Error) => this.d.logger.warn({ buildId: b.build_id, sandboxId: sbx.sandboxId, err: err.message }, 'build sandbox not killed; its timeout ends it'));
    }
  }

  private async stepsIn(
    sbx: { sandboxId: string; nodeId: string }, b: BuildRow, base: ResolvedTemplate, steps: Step[], cache: { keys: CacheKeys; resume?: { after: number; snapshotId: string } },
    spec: E2bBuildStart, log: BuildLog, deadline: number, watch: TemplateWatch,
  ): Promise<string> {
    const { keys, resume } = cache;
    await log('info', `Build sandbox ${sbx.sandboxId} started`);
    const node = await this.d.nodes.client(sbx.nodeId);
    const target = { node, sandboxId: sbx.sandboxId, teamId: b.team_id, files: this.d.files, log };
    let state = startState(base);
    let captured: string | undefined;
    for (const [i, step] of steps.entries()) {
      const n = String(i + 1);
      const args = step.args ?? [];
      const next = applyStep(state, step);
      if (resume && i < resume.after) {
        await log('info', `[${n}/${steps.length}] CACHED ${step.type} ${args.join(' ')}`.trimEnd());
        state = next;
        continue;
      }
      if (Date.now() > deadline) throw new StepFailed(n, `the build ran past its limit of ${Math.round((this.d.timeoutMs ?? BUILD_TIMEOUT_MS) / 60_000)} minutes before step ${n}`);
      if (await watch.check()) throw new StepFailed(n, `template ${b.template_id} was deleted during the build`);
      await log('info', `[${n}/${steps.length}] ${step.type} ${args.join(' ')}`.trimEnd());
      await runStep(target, step, n, state, next, deadline);
      state = next;
      if (capturesFiles(step)) {
        const envVars = { ...base.envVars, ...state.env };
        if (keys.steps[i] === keys.final) {
          captured = (await this.captureFinal(b, sbx.sandboxId, keys.final, envVars, log)).snapshot_id;
        } else {
          await this.captureStep(b, sbx.sandboxId, keys.steps[i], envVars, n, log);
        }
      }
    }
    if (captured) return captured;
    if (spec.startCmd) {
      await log('info', `Start command: ${spec.startCmd}${spec.readyCmd ? `; waiting for: ${spec.readyCmd}` : ''}`);
      await startAndWaitReady(node, sbx.sandboxId, { command: spec.startCmd, readyCommand: spec.readyCmd, user: state.user, ...(state.workdir ? { cwd: state.workdir } : {}), envVars: state.env }, (line) => log('info', line))
        .catch((err) => { throw new StepFailed('finalize', `the start command did not come up: ${toSvcError(err).message}`); });
      await log('info', 'Ready');
    }
    const snap = await this.captureFinal(b, sbx.sandboxId, keys.final, { ...base.envVars, ...state.env }, log);
    return snap.snapshot_id;
  }

  private async captureFinal(b: BuildRow, sandboxId: string, key: string, envVars: Record<string, string>, log: BuildLog) {
    const snap = await this.d.snapshots.capture(sandboxId, { purpose: 'build', cacheKey: key, buildId: b.build_id, envVars })
      .catch((err) => { throw new StepFailed('finalize', `the built files could not be kept: ${toSvcError(err).message}`); });
    await log('info', `Files captured (${Math.round(Number(snap.size_bytes) / 1024)} KiB over the base)`);
    return snap;
  }

  /** A step's files kept for the next build's cache; one not kept costs that build its time, not this one. */
  private async captureStep(b: BuildRow, sandboxId: string, key: string, envVars: Record<string, string>, n: string, log: BuildLog): Promise<void> {
    await this.d.snapshots.capture(sandboxId, { purpose: 'build', cacheKey: key, buildId: b.build_id, envVars }).then(
      () => undefined,
      (err) => log('warn', `step ${n}: its files could not be kept for the cache (${toSvcError(err).message}); the build goes on`),
    );
  }
}
