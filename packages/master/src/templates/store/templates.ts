import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { duplicateTemplate } from '../errors.ts';
import type { TemplateRow } from '../tables.ts';
import { isUniqueViolation } from './unique-violation.ts';

/** t_svc_template. */
export class TemplateStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts a template; a taken alias is ErrDuplicateTemplate (the unique index decides, not a prior read). */
  async insert(row: TemplateRow): Promise<void> {
    try {
      await this.db.insertInto('t_svc_template').values(row).execute();
    } catch (err) {
      if (isUniqueViolation(err) && row.alias) throw duplicateTemplate(row.alias);
      throw err;
    }
  }

  get(id: string): Promise<TemplateRow | undefined> {
    return this.db.selectFrom('t_svc_template').selectAll().where('template_id', '=', id).executeTakeFirst();
  }

  /** By id, then by alias. Exact matches only, also under MySQL's case-insensitive collations. */
  async resolve(ref: string): Promise<TemplateRow | undefined> {
    if (!ref) return undefined;
    const byId = await this.get(ref);
    if (byId?.template_id === ref) return byId;
    const byAlias = await this.db.selectFrom('t_svc_template').selectAll().where('alias', '=', ref).executeTakeFirst();
    return byAlias?.alias === ref ? byAlias : undefined;
  }

  list(): Promise<TemplateRow[]> {
    return this.db.selectFrom('t_svc_template').selectAll().orderBy('created_at').orderBy('template_id').execute();
  }

  async setAlias(id: string, alias: string | null): Promise<void> {
    try {
      await this.db.updateTable('t_svc_template').set({ alias, updated_at: Date.now() }).where('template_id', '=', id).execute();
    } catch (err) {
      if (isUniqueViolation(err) && alias) throw duplicateTemplate(alias);
      throw err;
    }
  }

  async update(id: string, patch: Partial<TemplateRow>): Promise<void> {
    await this.db.updateTable('t_svc_template').set({ ...patch, updated_at: Date.now() }).where('template_id', '=', id).execute();
  }

  /** Updates only while the template still follows `jobId` (a newer job wins). */
  async updateIfFollowing(id: string, jobId: string, patch: Partial<TemplateRow>): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_template').set({ ...patch, updated_at: Date.now() })
      .where('template_id', '=', id).where('latest_job_id', '=', jobId).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Templates whose latest job is `jobId`: the job's own template and any that joined it. */
  followers(jobId: string): Promise<TemplateRow[]> {
    return this.db.selectFrom('t_svc_template').selectAll().where('latest_job_id', '=', jobId).execute();
  }

  /** Templates still marked building although their latest job finished (a crash or a join race). */
  async unsettled(): Promise<TemplateRow[]> {
    return this.db.selectFrom('t_svc_template').selectAll('t_svc_template')
      .innerJoin('t_svc_template_job', 't_svc_template_job.job_id', 't_svc_template.latest_job_id')
      .where('t_svc_template.status', '=', 'building')
      .where('t_svc_template_job.status', 'in', ['BUILT', 'FAILED'])
      .execute();
  }

  /**
   * The newest template of this spec that has not failed and that `teamId` may use, its own or a
   * public one (a builder base made from an image).
   */
  async bySpecHash(specHash: string, teamId: string): Promise<TemplateRow | undefined> {
    return this.db.selectFrom('t_svc_template').selectAll().where('spec_hash', '=', specHash).where('status', '!=', 'failed')
      .where((eb) => eb.or([eb('team_id', '=', teamId), eb('public', '=', 1)]))
      .orderBy('created_at', 'desc').executeTakeFirst();
  }

  async usingArtifact(artifactId: string): Promise<TemplateRow[]> {
    return this.db.selectFrom('t_svc_template').selectAll().where('artifact_id', '=', artifactId).execute();
  }

  async delete(id: string): Promise<void> {
    await this.db.deleteFrom('t_svc_template').where('template_id', '=', id).execute();
  }
}
