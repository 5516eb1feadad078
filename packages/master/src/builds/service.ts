import { randomUUID } from 'node:crypto';
import { badRequest, conflict, ErrorCodes, notFound, SvcError } from '@svc/common';
import type { E2bBuildRequest, E2bBuildRequested, E2bBuildStart, E2bBuildStatusAnswer } from '@svc/contracts/template-routes';
import type { TeamQuotas } from '../sandboxes/ports.ts';
import type { BuilderBuild } from '../templates/builder-port.ts';
import type { Level } from './build-log.ts';
import { BuildRunner, type BuildRunnerDeps } from './build-runner.ts';
import { checkSpec, checkTags, DEFAULT_TAG, splitRef } from './build-spec.ts';
import { failAbandoned, pruneFinished } from './build-sweeps.ts';
import type { BuildRow } from './tables.ts';
import type { TeamBuilds } from './team-builds.ts';

const STATUS_ENTRIES = 100;
/** Builds a team may have requested and not started; each is a row until it starts or lapses (a day). */
export const MAX_WAITING_BUILDS = 20;
/** E2B's words for a request a newer one replaced. */
const SUPERSEDED = 'The build was canceled because it was superseded by a newer one.';

export interface BuildServiceDeps extends BuildRunnerDeps {
  /** Teams' limits (maxVcpus and maxMemoryMB for a build's size); absent: none. */
  quotas?: TeamQuotas;
  /** A team's builds at once (maxConcurrentBuilds), with its image templates' builds; absent: no limit. */
  teamBuilds?: TeamBuilds;
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
  private readonly runner: BuildRunner;

  constructor(private readonly d: BuildServiceDeps) {
    this.runner = new BuildRunner(d);
  }

  async request(body: E2bBuildRequest, caller?: string): Promise<E2bBuildRequested> {
    const full = body.name ?? body.alias;
    if (!full) throw badRequest('name is required');
    const [name, tag] = splitRef(full);
    const cpuCount = body.cpuCount ?? 2;
    const memoryMB = body.memoryMB ?? 1024;
    const tags = checkTags([...(tag ? [tag] : []), ...(body.tags ?? [])]);
    const t = await this.d.templates.forBuild(name, { cpuCount, memoryMB }, { teamId: caller });
    await this.supersede(t.template_id, tags);
    // Counted, not reserved: two requests at once may both pass the last place; the cap bounds the rows, not a resource.
    const waiting = await this.d.repo.countWaiting(t.team_id);
    if (waiting >= MAX_WAITING_BUILDS) {
      throw new SvcError(429, `the team has ${waiting} template builds requested and not started (at most ${MAX_WAITING_BUILDS}); start them, or wait: one not started within a day fails`);
    }
    const now = Date.now();
    const buildId = randomUUID();
    await this.d.repo.insert({
      build_id: buildId, template_id: t.template_id, status: 'waiting', cpu_count: cpuCount, memory_mb: memoryMB, spec: null,
      reason: null, snapshot_id: null, tags: JSON.stringify(tags), team_id: t.team_id, created_at: now, updated_at: now, finished_at: null,
    });
    const names = t.alias ? [t.alias] : [];
    return { templateID: t.template_id, buildID: buildId, names, aliases: names, tags, public: false };
  }

  /**
   * As E2B does: a new request fails the template's requests not started yet that ask for one
   * of its tags (`default` when none is named), so a client that asks again and again (a retry
   * loop, a build that failed before its start) leaves one waiting build, not one per request.
   * Requests for other tags of the template wait side by side, as parallel builds of E2B's do.
   */
  private async supersede(templateId: string, tags: string[]): Promise<void> {
    const asked = (row: string[]) => (row.length ? row : [DEFAULT_TAG]);
    const mine = new Set(asked(tags));
    for (const b of await this.d.repo.waitingOf(templateId)) {
      if (!asked(b.tags ? JSON.parse(b.tags) as string[] : []).some((x) => mine.has(x))) continue;
      await this.d.repo.transition(b.build_id, 'waiting', { status: 'error', reason: JSON.stringify({ message: SUPERSEDED }) });
    }
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
    // Exact, as the delete is: tags compare byte for byte on every engine (on MySQL since
    // 20261205100000), so `DEFAULT` is a tag of its own and removing it leaves `default`.
    if (gone.includes(DEFAULT_TAG)) throw badRequest(`the ${DEFAULT_TAG} tag names the template's current build and cannot be removed`);
    await this.d.repo.deleteTags(await this.templateIdOf(name), gone);
  }

  async tags(templateRef: string): Promise<Array<{ tag: string; buildID: string; createdAt: string }>> {
    const rows = await this.d.repo.tags(await this.templateIdOf(templateRef));
    return rows.map((r) => ({ tag: r.tag, buildID: r.build_id, createdAt: new Date(Number(r.created_at)).toISOString() }));
  }

  /**
   * E2B's files route: whether a COPY step's files are stored, or where to upload them. Files are
   * the caller's team's (the operator's on the master's address: the template's team): the hash
   * is the SDK's over the files, which the master cannot check against the archive, so a shared
   * store would let one team upload first what another team's build then copies.
   */
  async filesLink(templateRef: string, hash: string, origin: string, caller?: string): Promise<{ present: boolean; url?: string }> {
    const owner = await this.d.templates.teamOf(templateRef);
    if (!owner) throw notFound(`template ${templateRef} not found`, ErrorCodes.templateNotFound);
    return this.d.files.uploadLink(hash, caller ?? owner, origin);
  }

  /** The build snapshot a tag of the template names (a create of `name:tag`). */
  async snapshotOfTag(templateId: string, tag: string): Promise<string | undefined> {
    return (await this.d.repo.taggedBuild(templateId, tag))?.snapshot_id ?? undefined;
  }

  private async templateIdOf(ref: string): Promise<string> {
    const id = await this.d.templates.idOf(ref);
    if (!id) throw notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);
    return id;
  }

  /** Starts a requested build in the background; its progress is in status(). */
  async start(templateRef: string, buildId: string, spec: E2bBuildStart): Promise<void> {
    const b = await this.buildOf(templateRef, buildId);
    const base = checkSpec(spec);
    for (const [i, s] of (spec.steps ?? []).entries()) {
      if (s.type === 'COPY' && !(await this.d.files.input(s.filesHash!, b.team_id))) {
        throw badRequest(`steps[${i}] (COPY ${s.args?.[0]}): its files (hash ${s.filesHash}) were not uploaded; the SDK uploads them before it starts the build`);
      }
    }
    const limits = this.d.quotas ? await this.d.quotas.limits(b.team_id) : undefined;
    // The build's sandbox runs in the default team (docs/security.md, "Quotas"): its size is held
    // to what the team could run itself, so a build is no way past the team's own limits.
    for (const [key, size, what] of [['maxVcpus', Number(b.cpu_count), 'vCPUs'], ['maxMemoryMB', Number(b.memory_mb), 'MB of memory']] as const) {
      const max = limits?.[key];
      if (max && size > max) throw new SvcError(429, `team quota ${key}: the team may hold ${max} ${what}, and this template's build sandbox asks for ${size}; build it smaller (cpuCount, memoryMB)`);
    }
    // A team's builds at once: over it, E2B's 429 and the build stays waiting.
    const admit = this.d.teamBuilds ? this.d.teamBuilds.admit.bind(this.d.teamBuilds) : (_team: string, f: () => Promise<void>) => f();
    await admit(b.team_id, async () => {
      // Kept for the record, without the registry's credentials (a password, a cloud key, a GCP
      // service account's private key): nothing reads them back, and the database is no vault.
      const kept = spec.fromImageRegistry ? { ...spec, fromImageRegistry: '[redacted]' } : spec;
      if (!(await this.d.repo.transition(buildId, 'waiting', { status: 'building', spec: JSON.stringify(kept) }))) {
        const now = await this.d.repo.get(buildId);
        const why = now?.status === 'error' && now.reason ? `: ${(JSON.parse(now.reason) as { message: string }).message}` : '';
        throw conflict(`build ${buildId} cannot start: it is ${now?.status} (it was started already, or ended before its start${why})`);
      }
    });
    const job = this.runner.run(b, base, spec).catch((err: Error) => this.d.logger.error({ buildId, err: err.message }, 'template build ended without its outcome recorded'));
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }

  async status(templateId: string, buildId: string, q: { logsOffset?: number; limit?: number; level?: string }): Promise<E2bBuildStatusAnswer | undefined> {
    const b = await this.d.repo.get(buildId);
    if (!b || b.template_id !== templateId) return undefined;
    const entries = await this.d.repo.logs(buildId, q.logsOffset ?? 0, Math.min(q.limit ?? STATUS_ENTRIES, STATUS_ENTRIES), q.level);
    const reason = b.reason ? JSON.parse(b.reason) as { message: string; step?: string } : undefined;
    return {
      // `logs` is E2B's deprecated string list, which E2B fills for its removed V1 builds only
      // (its openapi: "always empty since the V1 build path was removed, use logEntries").
      templateID: templateId, buildID: buildId, status: b.status, logs: [],
      logEntries: entries.map((e) => ({ timestamp: new Date(Number(e.at)).toISOString(), level: e.level as Level, message: e.message })),
      ...(reason ? { reason } : {}),
    };
  }

  /** The template's builds, oldest first, for its E2B answers (GET /templates, GET /templates/{id}). */
  async buildsOf(templateId: string): Promise<BuilderBuild[]> {
    return (await this.d.repo.forTemplate(templateId)).map((b) => ({
      buildId: b.build_id, status: b.status, cpuCount: Number(b.cpu_count), memoryMB: Number(b.memory_mb),
      createdAt: Number(b.created_at), updatedAt: Number(b.updated_at), finishedAt: b.finished_at === null ? null : Number(b.finished_at),
    }));
  }

  /** E2B's build logs route: entries by time, at most 1000 (default 100). */
  async logs(templateRef: string, buildId: string, q: { cursor?: number; direction?: 'forward' | 'backward'; level?: string; limit?: number }) {
    await this.buildOf(templateRef, buildId);
    const rows = await this.d.repo.logsByTime(buildId, { cursor: q.cursor, direction: q.direction ?? 'forward', limit: q.limit ?? 100, minLevel: q.level });
    return { logs: rows.map((e) => ({ timestamp: new Date(Number(e.at)).toISOString(), level: e.level as Level, message: e.message })) };
  }

  /** Fails builds that nothing runs any more (build-sweeps.ts). */
  failAbandoned(now = Date.now()): Promise<string[]> {
    return failAbandoned(this.d, now);
  }

  /** Drops old builds' logs and failed builds' rows past their retention (build-sweeps.ts). */
  pruneFinished(now = Date.now()): Promise<{ logsOf: number; rows: number }> {
    return pruneFinished(this.d, now);
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
}
