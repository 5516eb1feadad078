import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { BuildLogRow, BuildRow, BuildStatus, TagRow } from './tables.ts';

const LEVELS = ['debug', 'info', 'warn', 'error'];

/** Database access for t_svc_build and t_svc_build_log. */
export class BuildRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: BuildRow): Promise<void> {
    await this.db.insertInto('t_svc_build').values(row).execute();
  }

  get(id: string): Promise<BuildRow | undefined> {
    return this.db.selectFrom('t_svc_build').selectAll().where('build_id', '=', id).executeTakeFirst();
  }

  /** Moves the build when its status is still `from`; false when it was not. */
  async transition(id: string, from: BuildStatus, patch: Partial<BuildRow>): Promise<boolean> {
    const now = Date.now();
    const finishing = patch.status === 'ready' || patch.status === 'error';
    const r = await this.db.updateTable('t_svc_build').set({ ...patch, updated_at: now, ...(finishing ? { finished_at: now } : {}) })
      .where('build_id', '=', id).where('status', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** The template's builds, oldest first. */
  forTemplate(templateId: string): Promise<BuildRow[]> {
    return this.db.selectFrom('t_svc_build').selectAll().where('template_id', '=', templateId)
      .orderBy('created_at').orderBy('build_id').execute();
  }

  /**
   * A page (by id, after `after`) of the builds that may be abandoned: waiting since before
   * `waitingBefore`, or building and not moved since before `silentBefore` (its log may be newer).
   */
  unfinished(q: { waitingBefore: number; silentBefore: number; after: string; limit: number }): Promise<BuildRow[]> {
    return this.db.selectFrom('t_svc_build').selectAll()
      .where((eb) => eb.or([
        eb.and([eb('status', '=', 'waiting'), eb('created_at', '<', q.waitingBefore)]),
        eb.and([eb('status', '=', 'building'), eb('updated_at', '<', q.silentBefore)]),
      ]))
      .where('build_id', '>', q.after).orderBy('build_id').limit(q.limit).execute();
  }

  /** The template's builds requested and not started. */
  waitingOf(templateId: string): Promise<BuildRow[]> {
    return this.db.selectFrom('t_svc_build').selectAll().where('template_id', '=', templateId).where('status', '=', 'waiting').execute();
  }

  /** How many builds the team requested and has not started. */
  async countWaiting(teamId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_build').select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('team_id', '=', teamId).where('status', '=', 'waiting').executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /**
   * Up to `limit` builds finished before `before` that are not their template's latest (a newer
   * build of it exists): their logs may go. `removable`: those whose row may go too, failed ones
   * that left nothing a template or its deletion needs (no snapshot of theirs, no capture that
   * names them, no tag). In (finished_at, build_id) order, after `after` when given: a sweep
   * pages on from the last row it read, since the rows it keeps stay past retention.
   */
  async pastRetention(before: number, limit: number, after?: { finishedAt: number; buildId: string }): Promise<Array<{ buildId: string; finishedAt: number; removable: boolean }>> {
    let sel = this.db.selectFrom('t_svc_build as b')
      .select(['b.build_id', 'b.status', 'b.snapshot_id', 'b.finished_at'])
      .select((eb) => [
        eb.exists(eb.selectFrom('t_svc_snapshot as s').select('s.snapshot_id').whereRef('s.build_id', '=', 'b.build_id')).as('captured'),
        eb.exists(eb.selectFrom('t_svc_template_tag as t').select('t.tag').whereRef('t.build_id', '=', 'b.build_id')).as('tagged'),
      ])
      .where('b.status', 'in', ['ready', 'error']).where('b.finished_at', '<', before)
      .where((eb) => eb.exists(eb.selectFrom('t_svc_build as n').select('n.build_id').whereRef('n.template_id', '=', 'b.template_id').whereRef('n.created_at', '>', 'b.created_at')))
    if (after) {
      sel = sel.where((eb) => eb.or([
        eb('b.finished_at', '>', after.finishedAt),
        eb.and([eb('b.finished_at', '=', after.finishedAt), eb('b.build_id', '>', after.buildId)]),
      ]));
    }
    const rows = await sel.orderBy('b.finished_at').orderBy('b.build_id').limit(limit).execute();
    return rows.map((r) => ({
      buildId: r.build_id,
      finishedAt: Number(r.finished_at),
      removable: r.status === 'error' && r.snapshot_id === null && !truthy(r.captured) && !truthy(r.tagged),
    }));
  }

  /** Deletes these builds' log entries, and the rows of `rows` among them. */
  async prune(logsOf: string[], rows: string[]): Promise<void> {
    if (logsOf.length) await this.db.deleteFrom('t_svc_build_log').where('build_id', 'in', logsOf).execute();
    if (rows.length) await this.db.deleteFrom('t_svc_build').where('build_id', 'in', rows).execute();
  }

  async appendLog(buildId: string, seq: number, entry: { at: number; level: string; message: string }): Promise<void> {
    await this.db.insertInto('t_svc_build_log').values({ build_id: buildId, seq, ...entry }).execute();
  }

  /**
   * Entries by time (E2B's build logs route): forward from `cursor` (ms, default the start),
   * oldest first; backward from `cursor` (default now), newest first.
   */
  async logsByTime(buildId: string, q: { cursor?: number; direction: 'forward' | 'backward'; limit: number; minLevel?: string }): Promise<BuildLogRow[]> {
    const levels = LEVELS.slice(Math.max(0, LEVELS.indexOf(q.minLevel ?? 'debug')));
    let sel = this.db.selectFrom('t_svc_build_log').selectAll().where('build_id', '=', buildId).where('level', 'in', levels);
    if (q.direction === 'forward') {
      if (q.cursor !== undefined) sel = sel.where('at', '>=', q.cursor);
      return sel.orderBy('seq', 'asc').limit(q.limit).execute();
    }
    if (q.cursor !== undefined) sel = sel.where('at', '<=', q.cursor);
    return sel.orderBy('seq', 'desc').limit(q.limit).execute();
  }

  /** When the build last wrote a log line (0: never). */
  async lastLogAt(buildId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_build_log').select((eb) => eb.fn.max('at').as('at')).where('build_id', '=', buildId).executeTakeFirst();
    return Number(r?.at ?? 0);
  }

  /** Entries from `offset` (their order), at `minLevel` or above. */
  async logs(buildId: string, offset: number, limit: number, minLevel = 'debug'): Promise<BuildLogRow[]> {
    const levels = LEVELS.slice(Math.max(0, LEVELS.indexOf(minLevel)));
    return this.db.selectFrom('t_svc_build_log').selectAll().where('build_id', '=', buildId).where('level', 'in', levels)
      .orderBy('seq').offset(offset).limit(limit).execute();
  }

  /** Points each tag of the template at the build (a tag names one build; moved, not added). */
  async setTags(templateId: string, buildId: string, tags: string[]): Promise<void> {
    if (!tags.length) return;
    await this.db.transaction().execute(async (tx) => {
      await tx.deleteFrom('t_svc_template_tag').where('template_id', '=', templateId).where('tag', 'in', tags).execute();
      const now = Date.now();
      await tx.insertInto('t_svc_template_tag').values(tags.map((tag) => ({ template_id: templateId, tag, build_id: buildId, created_at: now }))).execute();
    });
  }

  async deleteTags(templateId: string, tags: string[]): Promise<void> {
    await this.db.deleteFrom('t_svc_template_tag').where('template_id', '=', templateId).where('tag', 'in', tags).execute();
  }

  /**
   * By tag, in code-unit order: tags are case-sensitive on every engine, and an ORDER BY follows
   * each database's collation (PostgreSQL's locale put `prod` before or after `Prod`).
   */
  async tags(templateId: string): Promise<TagRow[]> {
    const rows = await this.db.selectFrom('t_svc_template_tag').selectAll().where('template_id', '=', templateId).execute();
    return rows.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
  }

  /** The ready build a tag of the template names. */
  async taggedBuild(templateId: string, tag: string): Promise<BuildRow | undefined> {
    return this.db.selectFrom('t_svc_template_tag').innerJoin('t_svc_build', 't_svc_build.build_id', 't_svc_template_tag.build_id')
      .selectAll('t_svc_build').where('t_svc_template_tag.template_id', '=', templateId).where('t_svc_template_tag.tag', '=', tag)
      .where('t_svc_build.status', '=', 'ready').executeTakeFirst();
  }
}

/** EXISTS answers true, 1 or '1' by engine. */
function truthy(v: unknown): boolean {
  return v === true || Number(v) === 1;
}
