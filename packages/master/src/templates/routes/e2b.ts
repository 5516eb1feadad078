import type { FastifyInstance } from 'fastify';
import { ErrorCodes, notFound, type SvcError } from '@svc/common';
import type { E2bBuildStatusAnswer, E2bTemplate, E2bTemplateDetail, TemplateCreate } from '@svc/contracts/template-routes';
import type { TemplateService } from '../service.ts';
import type { BuilderStatus } from '../builder-port.ts';
import type { TemplateRow } from '../tables.ts';
import { documentRoute } from './document-route.ts';
import { jobStatusAnswer, type StatusQuery } from './job-build-status.ts';
import { buildSummary, templateBuilds } from './template-builds.ts';
import { callerTeam } from '../../teams/caller.ts';

type Id = { Params: { templateID: string } };

/** docs/api.md "Templates (E2B shapes)": the official e2b SDK's template routes. */
/** What E2B's DELETE /templates/{id} needs of snapshots, which the official SDK deletes through it. */
export interface SnapshotDeletion {
  /** Deletes the snapshot `ref` names in `caller`'s team (undefined: any), if one does; false when none does. */
  deleteIfSnapshot(ref: string, caller?: string): Promise<boolean>;
  /** Deletes a build snapshot (a deleted builder template's). */
  deleteBuildSnapshot(snapshotId: string): Promise<void>;
}

/**
 * DELETE /templates/{id} when no template has that id or alias: the snapshot it names, else a
 * 404 with code 404, the only "not found" the official SDK's deleteSnapshot reads (docs/compatibility.md).
 */
export async function deleteSnapshotNamed(snapshots: SnapshotDeletion | undefined, ref: string, caller?: string): Promise<void> {
  if (snapshots && await snapshots.deleteIfSnapshot(ref, caller)) return;
  throw notFound(`no template or snapshot ${ref}`, 404);
}


export function registerE2bTemplateRoutes(app: FastifyInstance, svc: TemplateService, snapshots?: SnapshotDeletion, builder?: BuilderStatus): void {
  const on = documentRoute(app);
  on<{ Body: TemplateCreate }>('POST', '/templates', async (req, reply) => {
    const r = await svc.create(req.body, { teamId: callerTeam(req) });
    reply.status(202);
    return { templateID: r.template_id, buildID: r.job_id };
  });
  on('GET', '/templates', async (req) => {
    const out: E2bTemplate[] = [];
    for (const t of await svc.list(callerTeam(req))) {
      const row = await svc.row(t.template_id);
      out.push(e2bTemplate(row, await templateBuilds(svc, builder, row)));
    }
    return out;
  });
  on<{ Params: { alias: string } }>('GET', '/templates/aliases/{alias}', async (req) => {
    const t = await svc.row(req.params.alias);
    if (t.alias !== req.params.alias) throw notFound(`template alias ${req.params.alias} not found`, ErrorCodes.templateNotFound);
    return { templateID: t.template_id, public: Number(t.public) === 1 };
  });
  on<Id>('GET', '/templates/{templateID}', async (req): Promise<E2bTemplateDetail> => {
    const t = await svc.row(req.params.templateID);
    return {
      ...names(t), templateID: t.template_id, public: Number(t.public) === 1, createdAt: iso(t.created_at), updatedAt: iso(t.updated_at),
      lastSpawnedAt: null, spawnCount: 0, builds: await templateBuilds(svc, builder, t),
    };
  });
  on<Id>('DELETE', '/templates/{templateID}', async (req, reply) => {
    const ref = req.params.templateID;
    await svc.delete(ref).catch((err: SvcError) => {
      if (err.status !== 404) throw err;
      return deleteSnapshotNamed(snapshots, ref, callerTeam(req));
    });
    return reply.status(204).send();
  });
  on<{ Params: { templateID: string; buildID: string }; Querystring: StatusQuery }>('GET', '/templates/{templateID}/builds/{buildID}/status', async (req): Promise<E2bBuildStatusAnswer> => {
    const t = await svc.row(req.params.templateID);
    const built = await builder?.status(t.template_id, req.params.buildID, req.query);
    if (built) return built;
    const info = await svc.job(req.params.buildID);
    if (info.template_id !== t.template_id && t.latest_job_id !== info.job_id) {
      throw notFound(`build ${req.params.buildID} of template ${t.template_id} not found`);
    }
    return jobStatusAnswer(t.template_id, info, req.query);
  });
}

function e2bTemplate(t: TemplateRow, builds: E2bTemplateDetail['builds']): E2bTemplate {
  return {
    templateID: t.template_id, ...buildSummary(t, builds), ...names(t),
    cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
    public: Number(t.public) === 1, createdAt: iso(t.created_at), updatedAt: iso(t.updated_at), createdBy: null, lastSpawnedAt: null,
    spawnCount: 0,
  };
}

const names = (t: TemplateRow) => ({ aliases: t.alias ? [t.alias] : [], names: t.alias ? [t.alias] : [] });
const iso = (ms: number) => new Date(Number(ms)).toISOString();
