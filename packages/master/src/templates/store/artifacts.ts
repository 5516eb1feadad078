import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { ArtifactRow, ArtifactStatus, DefinitionRow, PlacementRow } from '../tables.ts';
import { isUniqueViolation } from './unique-violation.ts';

/** t_svc_template_artifact with its placement ("replica") rows. */
export class ArtifactStore {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: ArtifactRow): Promise<void> {
    await this.db.insertInto('t_svc_template_artifact').values(row).execute();
  }

  get(id: string): Promise<ArtifactRow | undefined> {
    return this.db.selectFrom('t_svc_template_artifact').selectAll().where('artifact_id', '=', id).executeTakeFirst();
  }

  list(): Promise<ArtifactRow[]> {
    return this.db.selectFrom('t_svc_template_artifact').selectAll().orderBy('created_at').execute();
  }

  /** Updates when the status is still one of `from`; answers whether it did. */
  async transition(id: string, from: ArtifactStatus[], patch: Partial<ArtifactRow>): Promise<boolean> {
    const r = await this.db.updateTable('t_svc_template_artifact').set({ ...patch, updated_at: Date.now() })
      .where('artifact_id', '=', id).where('status', 'in', from).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  async update(id: string, patch: Partial<ArtifactRow>): Promise<void> {
    await this.db.updateTable('t_svc_template_artifact').set({ ...patch, updated_at: Date.now() }).where('artifact_id', '=', id).execute();
  }

  /** Removes the row, only while it is still CLEANUP_PENDING. */
  async deleteIfCleanupPending(id: string): Promise<boolean> {
    const r = await this.db.deleteFrom('t_svc_template_artifact').where('artifact_id', '=', id)
      .where('status', '=', 'CLEANUP_PENDING').executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  }

  async placements(artifactId: string): Promise<PlacementRow[]> {
    return this.db.selectFrom('t_svc_template_placement').selectAll().where('artifact_id', '=', artifactId).orderBy('node_id').execute();
  }

  async placementsOnNode(nodeId: string): Promise<PlacementRow[]> {
    return this.db.selectFrom('t_svc_template_placement').selectAll().where('node_id', '=', nodeId).execute();
  }

  async setPlacement(artifactId: string, nodeId: string, status: 'READY' | 'DELETING'): Promise<void> {
    const now = Date.now();
    const r = await this.db.updateTable('t_svc_template_placement').set({ status, updated_at: now })
      .where('artifact_id', '=', artifactId).where('node_id', '=', nodeId).executeTakeFirst();
    if (Number(r.numUpdatedRows) > 0) return;
    try {
      await this.db.insertInto('t_svc_template_placement').values({ artifact_id: artifactId, node_id: nodeId, status, updated_at: now }).execute();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err; // written concurrently: same content
    }
  }

  async dropPlacements(artifactId: string, nodeIds?: string[]): Promise<void> {
    let q = this.db.deleteFrom('t_svc_template_placement').where('artifact_id', '=', artifactId);
    if (nodeIds) {
      if (nodeIds.length === 0) return;
      q = q.where('node_id', 'in', nodeIds);
    }
    await q.execute();
  }
}

/** t_svc_template_definition: which artifact a template's sandboxes were or are created from. */
export class DefinitionStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Makes `artifactId` the template's current definition and supersedes the others. */
  async makeCurrent(templateId: string, artifactId: string, jobId: string): Promise<void> {
    const now = Date.now();
    const r = await this.db.updateTable('t_svc_template_definition').set({ superseded_at: null, job_id: jobId })
      .where('template_id', '=', templateId).where('artifact_id', '=', artifactId).executeTakeFirst();
    if (Number(r.numUpdatedRows) === 0) {
      try {
        await this.db.insertInto('t_svc_template_definition')
          .values({ template_id: templateId, artifact_id: artifactId, job_id: jobId, created_at: now, superseded_at: null }).execute();
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
    }
    await this.db.updateTable('t_svc_template_definition').set({ superseded_at: now })
      .where('template_id', '=', templateId).where('artifact_id', '!=', artifactId).where('superseded_at', 'is', null).execute();
  }

  forTemplate(templateId: string): Promise<DefinitionRow[]> {
    return this.db.selectFrom('t_svc_template_definition').selectAll().where('template_id', '=', templateId).execute();
  }

  async supersedeAll(templateId: string): Promise<void> {
    await this.db.updateTable('t_svc_template_definition').set({ superseded_at: Date.now() })
      .where('template_id', '=', templateId).where('superseded_at', 'is', null).execute();
  }

  async deleteForTemplate(templateId: string): Promise<void> {
    await this.db.deleteFrom('t_svc_template_definition').where('template_id', '=', templateId).execute();
  }

  /** Drops superseded definitions older than `before` that no live sandbox can still be using. */
  async pruneSuperseded(before: number): Promise<number> {
    const r = await this.db.deleteFrom('t_svc_template_definition')
      .where('superseded_at', 'is not', null).where('superseded_at', '<', before)
      .where((eb) => eb.not(eb.exists(
        eb.selectFrom('t_svc_sandbox').select('t_svc_sandbox.sandbox_id')
          .whereRef('t_svc_sandbox.template_id', '=', 't_svc_template_definition.template_id')
          .where('t_svc_sandbox.state', '!=', 'terminated'),
      )))
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}

/**
 * Who still needs an artifact: templates that use it now, templates whose latest job made it (a
 * redo reuses that one, for example after a failed distribution), active jobs that build or
 * distribute it, and definitions that sandboxes may still run from (superseded less than `graceMs` ago, or with a
 * sandbox of that template that is not terminated).
 */
export async function countReferences(db: Kysely<Database>, artifactId: string, now: number, graceMs: number): Promise<number> {
  const templates = await db.selectFrom('t_svc_template').select((eb) => eb.fn.countAll().as('n'))
    .where('artifact_id', '=', artifactId).executeTakeFirst();
  const latestJobs = await db.selectFrom('t_svc_template')
    .innerJoin('t_svc_template_job', 't_svc_template_job.job_id', 't_svc_template.latest_job_id')
    .select((eb) => eb.fn.countAll().as('n'))
    .where('t_svc_template_job.artifact_id', '=', artifactId).executeTakeFirst();
  const jobs = await db.selectFrom('t_svc_template_job').select((eb) => eb.fn.countAll().as('n'))
    .where('artifact_id', '=', artifactId).where('status', 'in', ['PENDING', 'RUNNING']).executeTakeFirst();
  const definitions = await db.selectFrom('t_svc_template_definition').select((eb) => eb.fn.countAll().as('n'))
    .where('artifact_id', '=', artifactId)
    .where((eb) => eb.or([
      eb('superseded_at', 'is', null),
      eb('superseded_at', '>', now - graceMs),
      eb.exists(eb.selectFrom('t_svc_sandbox').select('t_svc_sandbox.sandbox_id')
        .whereRef('t_svc_sandbox.template_id', '=', 't_svc_template_definition.template_id')
        .where('t_svc_sandbox.state', '!=', 'terminated')),
    ]))
    .executeTakeFirst();
  // A snapshot's layer lies over the artifact its sandbox ran: creates from it need that artifact.
  const snapshots = await db.selectFrom('t_svc_snapshot').select((eb) => eb.fn.countAll().as('n'))
    .where('artifact_id', '=', artifactId).executeTakeFirst();
  return Number(templates?.n ?? 0) + Number(latestJobs?.n ?? 0) + Number(jobs?.n ?? 0) + Number(definitions?.n ?? 0) + Number(snapshots?.n ?? 0);
}

/**
 * What starts from the template's files and keeps it from being deleted: templates the builder made
 * from it, by name (their build snapshots lie over its artifact), then the user's snapshots of its
 * sandboxes, by id. Templates come first: they are few, and the refusal lists only the first 20.
 * A pause package does not hold the template: a paused sandbox outlives its template as a running
 * one does, and the package's row keeps the artifact referenced (countReferences).
 */
export async function snapshotsOfTemplate(db: Kysely<Database>, templateId: string): Promise<string[]> {
  const rows = await db.selectFrom('t_svc_snapshot').select(['snapshot_id', 'purpose']).where('template_id', '=', templateId)
    .where('purpose', '!=', 'pause').orderBy('snapshot_id').execute();
  const built = rows.filter((r) => r.purpose === 'build').map((r) => r.snapshot_id);
  const templates = built.length
    ? await db.selectFrom('t_svc_template').select(['template_id', 'alias']).where('layer_snapshot_id', 'in', built).orderBy('template_id').execute()
    : [];
  return [...templates.map((t) => `template ${t.alias ?? t.template_id}`), ...rows.filter((r) => r.purpose === 'snapshot').map((r) => r.snapshot_id)];
}

/**
 * The build snapshots a builder template's builds made (their results and their steps' cache) that
 * no other template's build captured, starts from or ended on: a cache hit can make another
 * template's build end on this one's capture.
 */
export async function buildSnapshotsOnlyOf(db: Kysely<Database>, t: { template_id: string; layer_snapshot_id: string | null }): Promise<string[]> {
  const builds = db.selectFrom('t_svc_build').select('build_id').where('template_id', '=', t.template_id);
  const made = await db.selectFrom('t_svc_build').select('snapshot_id').where('template_id', '=', t.template_id).where('snapshot_id', 'is not', null).execute();
  const captured = await db.selectFrom('t_svc_snapshot').select('snapshot_id').where('purpose', '=', 'build').where('build_id', 'in', builds).execute();
  const ids = [...new Set([t.layer_snapshot_id, ...made.map((r) => r.snapshot_id), ...captured.map((r) => r.snapshot_id)].filter((x): x is string => !!x))];
  if (!ids.length) return [];
  const layers = await db.selectFrom('t_svc_template').select('layer_snapshot_id as id').where('layer_snapshot_id', 'in', ids).where('template_id', '!=', t.template_id).execute();
  const results = await db.selectFrom('t_svc_build').select('snapshot_id as id').where('snapshot_id', 'in', ids).where('template_id', '!=', t.template_id).execute();
  const othersCaptures = await db.selectFrom('t_svc_snapshot').select('snapshot_id as id').where('snapshot_id', 'in', ids)
    .where('build_id', 'is not', null).where('build_id', 'not in', builds).execute();
  const taken = new Set([...layers, ...results, ...othersCaptures].map((r) => r.id));
  return ids.filter((id) => !taken.has(id));
}

/** Sandboxes of a template that are not terminated (running, paused or moving between). */
export async function liveSandboxCount(db: Kysely<Database>, templateId: string): Promise<number> {
  const r = await db.selectFrom('t_svc_sandbox').select((eb) => eb.fn.countAll().as('n'))
    .where('template_id', '=', templateId).where('state', '!=', 'terminated').executeTakeFirst();
  return Number(r?.n ?? 0);
}
