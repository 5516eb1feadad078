import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { JobRow, JobStatus } from '../tables.ts';
import { isUniqueViolation } from './unique-violation.ts';

export const ACTIVE: JobStatus[] = ['PENDING', 'RUNNING'];

/** t_svc_template_job. Status moves are compare-and-set on the current status. */
export class JobStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Inserts an active job. False when another active job holds the same spec: the unique index
   * on active_spec_hash refuses the row, on every engine and across masters.
   */
  async tryInsertActive(row: JobRow): Promise<boolean> {
    try {
      await this.db.insertInto('t_svc_template_job').values({ ...row, active_spec_hash: row.spec_hash }).execute();
      return true;
    } catch (err) {
      if (isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /** Inserts a job that is already finished (a legacy record, a redo refused at once). */
  async insertFinished(row: JobRow): Promise<void> {
    await this.db.insertInto('t_svc_template_job').values({ ...row, active_spec_hash: null }).execute();
  }

  /** How many jobs are in each status (the metric svc_build_jobs). */
  async countsByStatus(): Promise<Array<{ status: string; count: number }>> {
    const rows = await this.db.selectFrom('t_svc_template_job').select((eb) => ['status', eb.fn.countAll<number | string>().as('n')]).groupBy('status').execute();
    return rows.map((r) => ({ status: r.status, count: Number(r.n) }));
  }

  get(id: string): Promise<JobRow | undefined> {
    return this.db.selectFrom('t_svc_template_job').selectAll().where('job_id', '=', id).executeTakeFirst();
  }

  activeForSpec(specHash: string): Promise<JobRow | undefined> {
    return this.db.selectFrom('t_svc_template_job').selectAll().where('active_spec_hash', '=', specHash).executeTakeFirst();
  }

  /**
   * Moves the job when its status is still one of `from` (and, when given, its progress clock is
   * still `clock`). Finishing releases the spec.
   */
  async transition(id: string, from: JobStatus[], patch: Partial<JobRow>, clock?: number): Promise<boolean> {
    const now = Date.now();
    const finishing = patch.status === 'BUILT' || patch.status === 'FAILED';
    let q = this.db.updateTable('t_svc_template_job')
      .set({ ...patch, updated_at: now, ...(finishing ? { active_spec_hash: null, finished_at: now } : {}) })
      .where('job_id', '=', id).where('status', 'in', from);
    if (clock !== undefined) q = q.where('last_progress_at', '=', clock);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /**
   * RUNNING job whose build finished: moves it to DISTRIBUTING, once. A repeated BUILT callback
   * finds the phase already set and does nothing.
   */
  async startDistributing(id: string, patch: Partial<JobRow>): Promise<boolean> {
    const now = Date.now();
    const r = await this.db.updateTable('t_svc_template_job')
      .set({ ...patch, status: 'RUNNING', phase: 'DISTRIBUTING', last_progress_at: now, updated_at: now })
      .where('job_id', '=', id).where('status', 'in', ACTIVE)
      .where((eb) => eb.or([eb('phase', 'is', null), eb('phase', '!=', 'DISTRIBUTING')]))
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** Refreshes the staleness clock of an active job (never moves it backwards). */
  async touch(id: string, at: number): Promise<void> {
    await this.db.updateTable('t_svc_template_job').set({ last_progress_at: at, updated_at: Date.now() })
      .where('job_id', '=', id).where('status', 'in', ACTIVE).where('last_progress_at', '<', at).execute();
  }

  async update(id: string, patch: Partial<JobRow>): Promise<void> {
    await this.db.updateTable('t_svc_template_job').set({ ...patch, updated_at: Date.now() }).where('job_id', '=', id).execute();
  }

  staleActive(progressBefore: number): Promise<JobRow[]> {
    return this.db.selectFrom('t_svc_template_job').selectAll()
      .where('status', 'in', ACTIVE).where('last_progress_at', '<', progressBefore).execute();
  }

  forTemplate(templateId: string): Promise<JobRow[]> {
    return this.db.selectFrom('t_svc_template_job').selectAll().where('template_id', '=', templateId)
      .orderBy('created_at').orderBy('job_id').execute();
  }

  async countActiveUsing(artifactId: string): Promise<number> {
    const r = await this.db.selectFrom('t_svc_template_job').select((eb) => eb.fn.countAll().as('n'))
      .where('artifact_id', '=', artifactId).where('status', 'in', ACTIVE).executeTakeFirst();
    return Number(r?.n ?? 0);
  }
}
