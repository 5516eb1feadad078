import { createHash, randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { badRequest, conflict, ErrorCodes, notFound, SvcError, toSvcError, type Logger } from '@svc/common';
import type { TeamQuotas } from '../sandboxes/ports.ts';
import { usableBy } from '../teams/ownership.ts';
import type { CreateSandboxInput } from '@svc/contracts/master';
import type { E2bBuildRequest, E2bBuildRequested, E2bBuildStart, E2bBuildStatusAnswer } from '@svc/contracts/template-routes';
import type { ResolvedTemplate, TemplateResolver } from '../sandboxes/ports.ts';
import { shellQuote, startAndWaitReady } from '../sandboxes/start-command.ts';
import type { ExecInput } from '@svc/contracts/node-agent';
import type { BuildFiles, BuildNodes, BuildSandboxes, BuildSnapshots, BuilderTemplates } from './ports.ts';
import type { BuildRepo } from './repo.ts';
import type { BuildRow } from './tables.ts';

/** The base image E2B's `Template()` starts from when nothing else is named: our `base` template. */
const E2B_DEFAULT_IMAGE = /^(?:docker\.io\/)?e2bdev\/base(?::[\w.-]+)?$/;
const STEP_TIMEOUT_MS = 20 * 60_000;
/** A whole build's limit unless the master is told otherwise (master.build_timeout_sec). */
const BUILD_TIMEOUT_MS = 3600_000;
/** A build sandbox lives at most this long (it is killed when the build ends). */
const BUILD_SANDBOX_TIMEOUT_SEC = 2 * 3600;
/** Output lines of one step written to the build log as they come; of the rest, the last STEP_LOG_TAIL. */
const STEP_LOG_LINES = 1000;
const STEP_LOG_TAIL = 100;
const STATUS_ENTRIES = 100;
/** The tag of a template's current build (E2B's). */
export const DEFAULT_TAG = 'default';
const TAG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** A build silent this long is abandoned (failAbandoned); a requested one never started, after WAITING_LIMIT_MS. */
const SILENT_LIMIT_MS = STEP_TIMEOUT_MS + 10 * 60_000;
const WAITING_LIMIT_MS = 24 * 3600_000;
/** How long a build waits for the template of its `fromImage` (a pull and an ext4 build). */
const IMAGE_BASE_LIMIT_MS = 20 * 60_000;
const IMAGE_POLL_MS = 1_000;

type Step = NonNullable<E2bBuildStart['steps']>[number];
type Level = 'debug' | 'info' | 'warn' | 'error';

export interface BuildServiceDeps {
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
  /** Builds that run their steps at once on this master; more wait their turn (default 2). */
  maxConcurrent?: number;
  /** A build still running after this long fails and its sandbox is killed (default an hour). */
  timeoutMs?: number;
  /** Teams' limits (maxConcurrentBuilds); absent: none. */
  quotas?: TeamQuotas;
}

/** A step that failed: its number in E2B's counting (1 is the first step, `base` the start). */
class StepFailed extends Error {
  constructor(readonly step: string, message: string) { super(message); }
}

/**
 * E2B's template builder (docs/templates.md, "The builder"): a build request names the template,
 * the start request gives the base and the steps; the steps run in a real sandbox started from
 * the base (RUN through the node agent as the step's user, ENV, WORKDIR and USER kept for the
 * steps after), and the sandbox's files are then captured as a build snapshot, which the
 * template starts from. A build whose base and steps were built before reuses that snapshot.
 */
export class BuildService {
  private readonly running = new Set<Promise<void>>();
  private readonly slots: BuildSlots;

  constructor(private readonly d: BuildServiceDeps) {
    this.slots = new BuildSlots(Math.max(1, d.maxConcurrent ?? 2));
  }

  async request(body: E2bBuildRequest, caller?: string): Promise<E2bBuildRequested> {
    const full = body.name ?? body.alias;
    if (!full) throw badRequest('name is required');
    const [name, tag] = splitRef(full);
    const cpuCount = body.cpuCount ?? 2;
    const memoryMB = body.memoryMB ?? 1024;
    const tags = checkTags([...(tag ? [tag] : []), ...(body.tags ?? [])]);
    const t = await this.d.templates.forBuild(name, { cpuCount, memoryMB }, { teamId: caller });
    const now = Date.now();
    const buildId = randomUUID();
    await this.d.repo.insert({
      build_id: buildId, template_id: t.template_id, status: 'waiting', cpu_count: cpuCount, memory_mb: memoryMB, spec: null,
      reason: null, snapshot_id: null, tags: JSON.stringify(tags), team_id: t.team_id, created_at: now, updated_at: now, finished_at: null,
    });
    const names = t.alias ? [t.alias] : [];
    return { templateID: t.template_id, buildID: buildId, names, aliases: names, tags, public: false };
  }

  /** E2B's assignTags: the build `target` (`name:tag`, or `name` for the current one) gets these tags too. */
  async assignTags(target: string, tags: string[]): Promise<{ buildID: string; tags: string[] }> {
    const [name, tag = DEFAULT_TAG] = splitRef(target);
    const wanted = checkTags(tags);
    if (!wanted.length) throw badRequest('tags must name at least one tag');
    const templateId = await this.templateIdOf(name);
    const b = await this.d.repo.taggedBuild(templateId, tag);
    if (!b) throw notFound(`template ${name} has no ready build tagged ${tag}`);
    await this.d.repo.setTags(templateId, b.build_id, wanted);
    return { buildID: b.build_id, tags: wanted };
  }

  /** E2B's removeTags; `default` (the current build) cannot be removed. */
  async removeTags(name: string, tags: string[]): Promise<void> {
    const gone = checkTags(tags);
    if (!gone.length) throw badRequest('tags must name at least one tag');
    if (gone.includes(DEFAULT_TAG)) throw badRequest(`the ${DEFAULT_TAG} tag names the template's current build and cannot be removed`);
    await this.d.repo.deleteTags(await this.templateIdOf(name), gone);
  }

  async tags(templateRef: string): Promise<Array<{ tag: string; buildID: string; createdAt: string }>> {
    const rows = await this.d.repo.tags(await this.templateIdOf(templateRef));
    return rows.map((r) => ({ tag: r.tag, buildID: r.build_id, createdAt: new Date(Number(r.created_at)).toISOString() }));
  }

  /** E2B's files route: whether a COPY step's files are stored, or where to upload them. */
  async filesLink(templateRef: string, hash: string, origin: string): Promise<{ present: boolean; url?: string }> {
    await this.templateIdOf(templateRef);
    return this.d.files.uploadLink(hash, origin);
  }

  /** The build snapshot a tag of the template names (a create of `name:tag`). */
  async snapshotOfTag(templateId: string, tag: string): Promise<string | undefined> {
    return (await this.d.repo.taggedBuild(templateId, tag))?.snapshot_id ?? undefined;
  }

  private async templateIdOf(ref: string): Promise<string> {
    const id = await this.d.templates.idOf(ref);
    if (!id) throw notFound(`template ${ref} not found`, ErrorCodes.notFound);
    return id;
  }

  /** Starts a requested build in the background; its progress is in status(). */
  async start(templateRef: string, buildId: string, spec: E2bBuildStart): Promise<void> {
    const b = await this.buildOf(templateRef, buildId);
    const base = checkSpec(spec);
    for (const [i, s] of (spec.steps ?? []).entries()) {
      if (s.type === 'COPY' && !(await this.d.files.input(s.filesHash!))) {
        throw badRequest(`steps[${i}] (COPY ${s.args?.[0]}): its files (hash ${s.filesHash}) were not uploaded; the SDK uploads them before it starts the build`);
      }
    }
    // A team's builds at once (docs/security.md, "Quotas"): over it, E2B's 429 and the build stays waiting.
    const limit = this.d.quotas ? (await this.d.quotas.limits(b.team_id)).maxConcurrentBuilds : 0;
    if (limit) {
      const building = await this.d.repo.countBuilding(b.team_id);
      if (building >= limit) throw new SvcError(429, `team quota maxConcurrentBuilds reached: the team may run ${limit} template builds at once and runs ${building}; start this one when one ends`);
    }
    if (!(await this.d.repo.transition(buildId, 'waiting', { status: 'building', spec: JSON.stringify(spec) }))) {
      throw conflict(`build ${buildId} was started already (it is ${(await this.d.repo.get(buildId))?.status})`);
    }
    const job = this.run(b, base, spec).catch((err: Error) => this.d.logger.error({ buildId, err: err.message }, 'template build ended without its outcome recorded'));
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }

  async status(templateId: string, buildId: string, q: { logsOffset?: number; limit?: number; level?: string }): Promise<E2bBuildStatusAnswer | undefined> {
    const b = await this.d.repo.get(buildId);
    if (!b || b.template_id !== templateId) return undefined;
    const entries = await this.d.repo.logs(buildId, q.logsOffset ?? 0, Math.min(q.limit ?? STATUS_ENTRIES, STATUS_ENTRIES), q.level);
    const reason = b.reason ? JSON.parse(b.reason) as { message: string; step?: string } : undefined;
    return {
      templateID: templateId, buildID: buildId, status: b.status, logs: [],
      logEntries: entries.map((e) => ({ timestamp: new Date(Number(e.at)).toISOString(), level: e.level as Level, message: e.message })),
      ...(reason ? { reason } : {}),
    };
  }

  /** E2B's build logs route: entries by time, at most 1000 (default 100). */
  async logs(templateRef: string, buildId: string, q: { cursor?: number; direction?: 'forward' | 'backward'; level?: string; limit?: number }) {
    await this.buildOf(templateRef, buildId);
    const rows = await this.d.repo.logsByTime(buildId, { cursor: q.cursor, direction: q.direction ?? 'forward', limit: q.limit ?? 100, minLevel: q.level });
    return { logs: rows.map((e) => ({ timestamp: new Date(Number(e.at)).toISOString(), level: e.level as Level, message: e.message })) };
  }

  /**
   * Fails builds that nothing runs any more: a master that stopped mid-build left them. A build
   * under way on any master writes a log line at least once a step, so one silent for longer than
   * a step may run (with a margin) is abandoned; a requested build never started waits a day.
   * Their sandboxes end with their timeout.
   */
  async failAbandoned(now = Date.now()): Promise<string[]> {
    const failed: string[] = [];
    for (const b of await this.d.repo.unfinished()) {
      const last = b.status === 'waiting' ? Number(b.created_at) : Math.max(Number(b.updated_at), await this.d.repo.lastLogAt(b.build_id));
      if (now - last < (b.status === 'waiting' ? WAITING_LIMIT_MS : SILENT_LIMIT_MS)) continue;
      const message = b.status === 'waiting' ? 'the build was requested but never started' : 'the build stopped (its master went away); build again';
      if (await this.d.repo.transition(b.build_id, b.status, { status: 'error', reason: JSON.stringify({ message }) })) {
        await this.d.templates.builderFailed(b.template_id, message);
        failed.push(b.build_id);
      }
    }
    return failed;
  }

  /** Waits for builds under way (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  private async buildOf(templateRef: string, buildId: string): Promise<BuildRow> {
    const b = await this.d.repo.get(buildId);
    if (!b || (b.template_id !== templateRef && (await this.d.templates.idOf(templateRef)) !== b.template_id)) {
      throw notFound(`build ${buildId} of template ${templateRef} not found`);
    }
    return b;
  }

  /** An image base: its template (made, or one made before), once its pull and build are done. */
  private async imageBase(base: Extract<BaseSpec, { kind: 'image' }>, log: (level: Level, message: string) => Promise<void>): Promise<string> {
    await log('info', `Base image ${base.image}: pulling it as a template`);
    const id = await this.d.templates.imageTemplate(base.image, base.auth).catch((err) => {
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

  private async run(b: BuildRow, baseSpec: BaseSpec, spec: E2bBuildStart): Promise<void> {
    let seq = 0;
    const log = async (level: Level, message: string) => {
      await this.d.repo.appendLog(b.build_id, seq++, { at: Date.now(), level, message });
    };
    const steps = spec.steps ?? [];
    try {
      const baseRef = baseSpec.kind === 'template' ? baseSpec.ref : await this.imageBase(baseSpec, log);
      await log('info', `Building from ${baseSpec.kind === 'template' ? baseRef : baseSpec.image}: ${steps.length} step(s)`);
      const base = await this.d.resolver.resolveForCreate(baseRef).catch((err) => {
        throw new StepFailed('base', `the base ${baseRef} cannot be used: ${toSvcError(err).message}`);
      });
      // Another team's private template is no base (docs/security.md): it is reported as not found.
      if (base.owner && !usableBy(b.team_id, base.owner)) throw new StepFailed('base', `the base ${baseRef} cannot be used: template ${baseRef} not found`);
      const keys = cacheKeys(base, steps, spec);
      const forcedFrom = spec.force ? 0 : steps.findIndex((s) => s.force);
      const whole = forcedFrom === -1 ? await this.d.snapshots.byCacheKey(keys.final) : undefined;
      let snapshotId: string;
      if (whole) {
        await log('info', 'Every step is cached from an earlier build: nothing to run');
        snapshotId = whole.snapshot_id;
      } else {
        const resume = await this.cachedPrefix(steps, keys.steps, forcedFrom === -1 ? steps.length : forcedFrom);
        snapshotId = await this.inSlot(log, () => this.runSteps(b, base, steps, { keys, resume }, spec, log, Date.now() + (this.d.timeoutMs ?? BUILD_TIMEOUT_MS)));
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

  /** Runs `work` once one of the master's build slots is free; a line a minute while it waits. */
  private async inSlot<T>(log: (level: Level, message: string) => Promise<void>, work: () => Promise<T>): Promise<T> {
    if (!this.slots.free) {
      await log('info', `Queued: ${this.slots.busy} build(s) running on this master, ${this.slots.waiting} waiting before this one`);
      const ticker = setInterval(() => { void log('info', 'Still queued').catch(() => { /* the next line says it again */ }); }, 60_000);
      try {
        await this.slots.acquire();
      } finally {
        clearInterval(ticker);
      }
      await log('info', 'Starting: a build slot is free');
    } else {
      await this.slots.acquire();
    }
    try {
      return await work();
    } finally {
      this.slots.release();
    }
  }

  /**
   * The longest run of first steps (before `usable`, where a forced step starts) whose files an
   * earlier build captured: the build resumes after it, from that capture.
   */
  private async cachedPrefix(steps: Step[], keys: string[], usable: number): Promise<{ after: number; snapshotId: string } | undefined> {
    for (let i = usable - 1; i >= 0; i--) {
      if (!capturesFiles(steps[i])) continue;
      const hit = await this.d.snapshots.byCacheKey(keys[i]);
      if (hit) return { after: i + 1, snapshotId: hit.snapshot_id };
    }
    return undefined;
  }

  /**
   * Runs the steps in a sandbox of the base, or of the cached capture of the first steps, and
   * captures its files after each step that changes them (the next build's cache) and at the
   * end; the sandbox is then killed.
   */
  private async runSteps(
    b: BuildRow, base: ResolvedTemplate, steps: Step[], cache: { keys: CacheKeys; resume?: { after: number; snapshotId: string } },
    spec: E2bBuildStart, log: (level: Level, message: string) => Promise<void>, deadline: number,
  ): Promise<string> {
    const input: CreateSandboxInput = {
      template: base.templateId, timeout: BUILD_SANDBOX_TIMEOUT_SEC, onTimeout: 'kill', autoResume: false,
      metadata: { 'svc.build': b.build_id }, envVars: {}, secure: false,
      network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
      cpuCount: Number(b.cpu_count), memoryMB: Number(b.memory_mb),
    };
    // A built base's start command is not the build's: the build runs its own at the end.
    const { start: _baseStart, ...plainBase } = base;
    const { keys } = cache;
    // A cached capture holds every file change since the base's artifact: it replaces the base's layer.
    const layer = cache.resume && await this.d.snapshots.layerOf(cache.resume.snapshotId);
    if (cache.resume && !layer) await log('warn', `The cached files of the first ${cache.resume.after} step(s) are gone (deleted meanwhile): every step runs`);
    const resume = layer ? cache.resume : undefined;
    const from: ResolvedTemplate = layer && resume ? { ...plainBase, layer: { snapshotId: resume.snapshotId, ref: layer.ref } } : plainBase;
    const sbx = await this.d.sandboxes.create(input, from).catch((err) => {
      throw new StepFailed('base', `no sandbox of the ${resume ? 'cached steps' : 'base'} could start: ${toSvcError(err).message}`);
    });
    try {
      await log('info', `Build sandbox ${sbx.sandboxId} started`);
      const node = await this.d.nodes.client(sbx.nodeId);
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
        await log('info', `[${n}/${steps.length}] ${step.type} ${args.join(' ')}`.trimEnd());
        if (step.type === 'WORKDIR') {
          await this.exec(node, sbx.sandboxId, { command: WORKDIR_SCRIPT, args: [next.workdir!, `${state.user}:`], user: 'root', state: { ...state, workdir: '/' } }, n, log);
        } else if (step.type === 'USER') {
          await this.exec(node, sbx.sandboxId, { command: USER_SCRIPT, args: [next.user], user: 'root', state: { ...state, workdir: '/' } }, n, log);
        } else if (step.type === 'RUN') {
          await this.exec(node, sbx.sandboxId, { command: args[0], user: args[1] || state.user, state, timeoutMs: Math.max(1_000, Math.min(STEP_TIMEOUT_MS, deadline - Date.now())) }, n, log);
        } else if (step.type === 'COPY') {
          await this.copy(node, sbx.sandboxId, step, state, n, log);
        }
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
    } finally {
      await this.d.sandboxes.kill(sbx.sandboxId).catch((err: Error) => this.d.logger.warn({ buildId: b.build_id, sandboxId: sbx.sandboxId, err: err.message }, 'build sandbox not killed; its timeout ends it'));
    }
  }

  private async captureFinal(b: BuildRow, sandboxId: string, key: string, envVars: Record<string, string>, log: (level: Level, message: string) => Promise<void>) {
    const snap = await this.d.snapshots.capture(sandboxId, { purpose: 'build', cacheKey: key, buildId: b.build_id, envVars })
      .catch((err) => { throw new StepFailed('finalize', `the built files could not be kept: ${toSvcError(err).message}`); });
    await log('info', `Files captured (${Math.round(Number(snap.size_bytes) / 1024)} KiB over the base)`);
    return snap;
  }

  /** A step's files kept for the next build's cache; one not kept costs that build its time, not this one. */
  private async captureStep(b: BuildRow, sandboxId: string, key: string, envVars: Record<string, string>, n: string, log: (level: Level, message: string) => Promise<void>): Promise<void> {
    await this.d.snapshots.capture(sandboxId, { purpose: 'build', cacheKey: key, buildId: b.build_id, envVars }).then(
      () => undefined,
      (err) => log('warn', `step ${n}: its files could not be kept for the cache (${toSvcError(err).message}); the build goes on`),
    );
  }

  /**
   * A COPY step: the node agent feeds the uploaded archive to tar in the sandbox, then COPY_SCRIPT
   * moves what the source names to the destination with its owner and mode (docs/templates.md).
   */
  private async copy(node: Awaited<ReturnType<BuildNodes['client']>>, sandboxId: string, step: Step, state: StepState, n: string, log: (level: Level, message: string) => Promise<void>): Promise<void> {
    const [src, dest, owner, mode] = step.args ?? [];
    const input = await this.d.files.input(step.filesHash!);
    if (!input) throw new StepFailed(n, `step ${n}: the files of COPY ${src} are gone from the store; build again to upload them`);
    const dir = `/tmp/.svc-copy-${n}-${step.filesHash!.slice(0, 16)}`;
    const unpack = step.gzip === false ? 'tar -xf -' : 'tar -xzf -';
    await this.exec(node, sandboxId, { command: `rm -rf "$1" && mkdir -p "$1" && ${unpack} -C "$1"`, args: [dir], user: 'root', state: { ...state, workdir: '/' }, stdin: input }, n, log);
    const who = owner || state.user;
    // Run as root, but where the step's user is: a relative destination is under its WORKDIR, else its home.
    await this.exec(node, sandboxId, {
      command: COPY_SCRIPT, args: [posix.join(dir, copySourceBase(src)), dest, who.includes(':') ? who : `${who}:`, mode ?? '', dir], user: 'root',
      state: { ...state, workdir: state.workdir ?? homeOf(state.user) },
    }, n, log);
  }

  private async exec(
    node: Awaited<ReturnType<BuildNodes['client']>>, sandboxId: string,
    c: { command: string; args?: string[]; user: string; state: { workdir?: string; env: Record<string, string> }; stdin?: ExecInput; timeoutMs?: number },
    step: string, log: (level: Level, message: string) => Promise<void>,
  ): Promise<void> {
    // Arguments reach the command as "$1"…, quoted, so a path is never re-read by the shell.
    const command = c.args?.length ? `set -- ${c.args.map(shellQuote).join(' ')}; ${c.command}` : c.command;
    const output = new StepOutput(log);
    const r = await node.exec(sandboxId, { command, user: c.user, ...(c.state.workdir ? { cwd: c.state.workdir } : {}), envVars: c.state.env, timeoutMs: c.timeoutMs ?? STEP_TIMEOUT_MS, ...(c.stdin ? { stdin: c.stdin } : {}) }, (stream, text) => output.add(stream, text))
      .catch(async (err) => {
        await output.end().catch(() => { /* the step's own failure is the one to report */ });
        throw new StepFailed(step, `step ${step} could not run: ${toSvcError(err).message}`);
      });
    await output.end();
    if (r.exitCode !== 0) {
      const last = [...r.stderr.trim().split('\n'), ...r.stdout.trim().split('\n')].filter(Boolean).slice(-3).join(' | ');
      throw new StepFailed(step, `step ${step} exited with code ${r.exitCode}${r.exitCode === 124 ? ` (killed after ${Math.round((c.timeoutMs ?? STEP_TIMEOUT_MS) / 1000)} s)` : ''}${last ? `: ${last}` : ''}`);
    }
  }
}

/**
 * A step's output in the build log as it comes, a line an entry (stdout info, stderr warn): the
 * first STEP_LOG_LINES lines, then, when the step ends, how many were left out and the last ones.
 */
class StepOutput {
  private readonly partial = { stdout: '', stderr: '' };
  private written = 0;
  private skipped = 0;
  private readonly tail: Array<[Level, string]> = [];
  private chain = Promise.resolve();

  constructor(private readonly log: (level: Level, message: string) => Promise<void>) {}

  add(stream: 'stdout' | 'stderr', text: string): void {
    const lines = (this.partial[stream] + text).split('\n');
    this.partial[stream] = lines.pop()!;
    for (const line of lines) this.line(stream === 'stdout' ? 'info' : 'warn', line);
  }

  /** Writes what is left: unfinished lines, and the tail of a step that said too much. */
  async end(): Promise<void> {
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.partial[stream]) this.line(stream === 'stdout' ? 'info' : 'warn', this.partial[stream]);
      this.partial[stream] = '';
    }
    if (this.skipped) {
      this.write('info', `… ${this.skipped - this.tail.length} line(s) of output not shown …`);
      for (const [level, line] of this.tail) this.write(level, line);
    }
    await this.chain;
  }

  private line(level: Level, line: string): void {
    if (line === '') return;
    if (this.written < STEP_LOG_LINES) {
      this.written++;
      this.write(level, line);
      return;
    }
    this.skipped++;
    this.tail.push([level, line]);
    if (this.tail.length > STEP_LOG_TAIL) this.tail.shift();
  }

  /** In order: each entry waits for the one before; one that fails fails the step's end. */
  private write(level: Level, message: string): void {
    this.chain = this.chain.then(() => this.log(level, message));
  }
}

/** What a build starts from: a template, or a registry image (made a template first). */
type BaseSpec = { kind: 'template'; ref: string } | { kind: 'image'; image: string; auth?: { username: string; password: string } };

/** The builds one master runs at once; the others wait in arrival order. */
class BuildSlots {
  busy = 0;
  private readonly queue: Array<() => void> = [];

  constructor(private readonly size: number) {}

  get free(): boolean { return this.busy < this.size && this.queue.length === 0; }
  get waiting(): number { return this.queue.length; }

  acquire(): Promise<void> {
    if (this.free) { this.busy++; return Promise.resolve(); }
    return new Promise((resolve) => this.queue.push(() => { this.busy++; resolve(); }));
  }

  release(): void {
    this.busy--;
    this.queue.shift()?.();
  }
}

/** The base a start request names, after its checks (each a 400 naming what is wrong). */
function checkSpec(spec: E2bBuildStart): BaseSpec {
  const { fromImage, fromTemplate } = spec;
  if (!!fromImage === !!fromTemplate) throw badRequest('exactly one of fromImage and fromTemplate must be given');
  for (const [i, s] of (spec.steps ?? []).entries()) {
    const args = s.args ?? [];
    const where = `steps[${i}] (${s.type})`;
    if (s.type === 'COPY') {
      const [src, dest, owner, mode] = args;
      if (!src || src.startsWith('/') || src.split('/').includes('..')) throw badRequest(`${where}: args[0] must be a path inside the build context`);
      if (!dest) throw badRequest(`${where}: args[1] must be the destination`);
      if (owner && !/^[a-z_][a-z0-9_.-]{0,31}(:[a-z_][a-z0-9_.-]{0,31})?$/i.test(owner)) throw badRequest(`${where}: ${owner} is not user or user:group`);
      if (mode && !/^[0-7]{3,4}$/.test(mode)) throw badRequest(`${where}: mode ${mode} is not an octal mode`);
      if (!s.filesHash || !/^[0-9a-f]{64}$/.test(s.filesHash)) throw badRequest(`${where}: filesHash must be the files hash of 64 hex digits`);
    }
    if (s.type === 'RUN' && !args[0]?.trim()) throw badRequest(`${where}: args[0] must be the command`);
    if (s.type === 'ENV' && (args.length === 0 || args.length % 2 !== 0 || args.some((a, k) => k % 2 === 0 && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(a)))) {
      throw badRequest(`${where}: args must be name, value pairs with names of letters, digits and _`);
    }
    if ((s.type === 'WORKDIR' || s.type === 'USER') && (args.length !== 1 || !args[0])) throw badRequest(`${where}: args must be one value`);
    if (s.type === 'USER' && !/^[a-z_][a-z0-9_.-]{0,31}$/i.test(args[0])) throw badRequest(`${where}: ${args[0]} is not a user name`);
  }
  if (fromTemplate) return { kind: 'template', ref: fromTemplate };
  if (E2B_DEFAULT_IMAGE.test(fromImage!)) return { kind: 'template', ref: 'base' };
  const auth = registryAuth(spec.fromImageRegistry);
  return { kind: 'image', image: fromImage!, ...(auth ? { auth } : {}) };
}

/**
 * fromImageRegistry as registry credentials: `registry` {username, password} as they are; `gcp`
 * as the `_json_key` login Google's registries take; `aws` needs ECR's token API: refused.
 */
function registryAuth(r: E2bBuildStart['fromImageRegistry']): { username: string; password: string } | undefined {
  if (r === undefined || r === null) return undefined;
  const reg = r as { type?: unknown; username?: unknown; password?: unknown; serviceAccountJson?: unknown };
  if (reg.type === 'registry') {
    if (typeof reg.username !== 'string' || !reg.username || typeof reg.password !== 'string') throw badRequest('fromImageRegistry of type registry needs username and password');
    return { username: reg.username, password: reg.password };
  }
  if (reg.type === 'gcp') {
    if (typeof reg.serviceAccountJson !== 'string' || !reg.serviceAccountJson) throw badRequest('fromImageRegistry of type gcp needs serviceAccountJson');
    return { username: '_json_key', password: reg.serviceAccountJson };
  }
  if (reg.type === 'aws') throw badRequest('fromImageRegistry of type aws (ECR) is not supported by svc: give the registry\'s username and password (type registry), e.g. from `aws ecr get-login-password`');
  throw badRequest('fromImageRegistry.type must be registry, gcp or aws');
}

/**
 * COPY's move, as root in the step's WORKDIR: "$1" what the source names in the unpacked archive,
 * "$2" the destination (relative to WORKDIR; a trailing / means a directory), "$3" the owner,
 * "$4" the mode or empty, "$5" the unpack directory, removed at the end. Docker's COPY semantics:
 * a directory's contents merge into the destination, a file or symlink lands at it or in it.
 */
const COPY_SCRIPT = [
  'src="$1"; dest="$2"; owner="$3"; mode="$4"',
  'case "$dest" in /*) ;; *) dest="$(pwd)/$dest" ;; esac',
  'if [ ! -e "$src" ] && [ ! -L "$src" ]; then echo "COPY: ${src#$5/} is not among the uploaded files" >&2; exit 1; fi',
  'if [ -d "$src" ] && [ ! -L "$src" ]; then',
  '  chown -R "$owner" "$src" && { [ -z "$mode" ] || chmod -R "$mode" "$src"; } || exit 1',
  // GNU tar keeps what the destination has (a symlink to a directory, a directory's owner); an
  // image with another tar (BusyBox) merges without those options.
  '  if tar --version 2>/dev/null | grep -q GNU; then keep="--keep-directory-symlink --no-overwrite-dir"; else keep=""; fi',
  '  mkdir -p "$dest" && (cd "$src" && tar -cf - .) | tar -xf - -C "$dest" $keep || exit 1',
  'else',
  '  chown -h "$owner" "$src" || exit 1',
  '  if [ -n "$mode" ] && [ ! -L "$src" ]; then chmod "$mode" "$src" || exit 1; fi',
  '  case "$dest" in */) mkdir -p "$dest" ;; *) mkdir -p "$(dirname "$dest")" ;; esac || exit 1',
  '  mv -f "$src" "$dest" || exit 1',
  'fi',
  'rm -rf "$5"',
].join('\n');

/** WORKDIR: the directories it makes are the current user's ("$2"), as E2B's are; existing ones keep their owner. */
const WORKDIR_SCRIPT = 'd="$1"; first=""; while [ ! -e "$d" ]; do first="$d"; d="$(dirname "$d")"; done; [ -z "$first" ] || { mkdir -p "$1" && chown -R "$2" "$first"; }';

/** USER: a user the image lacks is made (with a home and bash), as E2B's builder makes it. */
const USER_SCRIPT = 'id -u "$1" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$1"';

/** The part of a COPY source before its first glob: the SDK's archive holds only what matched below it. */
function copySourceBase(src: string): string {
  const parts = src.replace(/^\.\//, '').split('/').filter((p) => p && p !== '.');
  const glob = parts.findIndex((p) => /[*?[{]/.test(p));
  return (glob < 0 ? parts : parts.slice(0, glob)).join('/');
}

/**
 * What ENV, USER and WORKDIR steps set for the steps after them, and for the start command.
 * `workdir` absent: the user's home, where envd and the node agent start a command that names none.
 */
interface StepState { user: string; workdir?: string; env: Record<string, string> }

/** E2B's builds run their steps as `user` unless a USER step or the base says otherwise. */
const DEFAULT_USER = 'user';

/** Where a build's steps start: the base's recorded user, directory and environment (an image's ENV). */
function startState(base: ResolvedTemplate): StepState {
  return { user: base.defaultUser ?? DEFAULT_USER, ...(base.defaultWorkdir ? { workdir: base.defaultWorkdir } : {}), env: { ...base.envVars } };
}

/** The state after a step: the one place ENV, USER and WORKDIR are interpreted. */
function applyStep(state: StepState, step: Step): StepState {
  const args = step.args ?? [];
  if (step.type === 'ENV') {
    const env = { ...state.env };
    for (let k = 0; k + 1 < args.length; k += 2) env[args[k]] = args[k + 1];
    return { ...state, env };
  }
  if (step.type === 'USER') return { ...state, user: args[0] };
  if (step.type === 'WORKDIR') return { ...state, workdir: posix.resolve(state.workdir ?? homeOf(state.user), args[0]) };
  return state;
}

/** The home a relative WORKDIR is resolved against when none was set (Debian's layout). */
function homeOf(user: string): string {
  return user === 'root' ? '/root' : `/home/${user}`;
}

/** `name` or `name:tag`. */
function splitRef(ref: string): [string, string | undefined] {
  const [name, tag, ...rest] = ref.split(':');
  if (rest.length || tag === '' || !name) throw badRequest(`${JSON.stringify(ref)} is not name or name:tag`);
  return [name, tag];
}

function checkTags(tags: string[]): string[] {
  for (const t of tags) if (!TAG.test(t)) throw badRequest(`tag ${JSON.stringify(t)} is not valid: letters, digits, '.', '_' and '-', at most 128`);
  return [...new Set(tags)];
}

/** The cache keys of a build's steps (each after the steps before it) and of what the build makes. */
interface CacheKeys { steps: string[]; final: string }

/**
 * A build's cache keys (docs/templates.md, "The build cache"): each step's is the hash of the key
 * before it (the base's files first) and the step (type, arguments, files hash); the build's is the
 * last step's, or with a start command (which may write files) the hash of that and the commands.
 */
function cacheKeys(base: ResolvedTemplate, steps: Step[], start: Pick<E2bBuildStart, 'startCmd' | 'readyCmd'>): CacheKeys {
  const sha = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('hex');
  let key = sha({ base: { artifact: base.artifact.sha256, layer: base.layer?.ref.sha256 ?? null } });
  const keys = steps.map((s) => (key = sha({ after: key, step: { type: s.type, args: s.args ?? [], filesHash: s.filesHash ?? null } })));
  const last = keys.at(-1);
  const final = last && !start.startCmd && capturesFiles(steps.at(-1)!) ? last : sha({ after: key, start: [start.startCmd ?? null, start.readyCmd ?? null] });
  return { steps: keys, final };
}

/**
 * Steps after which the build keeps a capture for the cache: those that do work. ENV changes only
 * the steps' state; WORKDIR and USER are cheap to do again after the capture before them.
 */
function capturesFiles(step: Step): boolean {
  return step.type === 'RUN' || step.type === 'COPY';
}
