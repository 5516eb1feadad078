import type { FastifyInstance } from 'fastify';
import { notFound } from '@svc/common';
import type { TemplateService } from '../service.ts';
import type { JobRow, TemplateRow } from '../tables.ts';

type BuildStatus = 'building' | 'waiting' | 'ready' | 'error';
type IdParams = { Params: { id: string } };

/** docs/api.md "Templates (E2B shapes)": the official e2b SDK's template routes. */
export function registerE2bTemplateRoutes(app: FastifyInstance, svc: TemplateService): void {
  app.post('/templates', async (req, reply) => {
    const r = await svc.create(req.body);
    reply.status(202);
    return { templateID: r.template_id, buildID: r.job_id };
  });
  app.get('/templates', async () => {
    const out = [];
    for (const t of await svc.list()) {
      const row = await svc.row(t.template_id);
      out.push(e2bTemplate(row, await svc.jobsOf(row.template_id)));
    }
    return out;
  });
  app.get<{ Params: { alias: string } }>('/templates/aliases/:alias', async (req) => {
    const t = await svc.row(req.params.alias);
    if (t.alias !== req.params.alias) throw notFound(`template alias ${req.params.alias} not found`, 130404);
    return { templateID: t.template_id, public: false };
  });
  app.get<IdParams>('/templates/:id', async (req) => {
    const t = await svc.row(req.params.id);
    const jobs = await svc.jobsOf(t.template_id);
    return {
      ...names(t), templateID: t.template_id, public: false, createdAt: iso(t.created_at), updatedAt: iso(t.updated_at),
      lastSpawnedAt: null, spawnCount: 0, builds: (await withForeignLatest(svc, t, jobs)).map((j) => e2bBuild(t, j)),
    };
  });
  app.delete<IdParams>('/templates/:id', async (req, reply) => {
    await svc.delete(req.params.id);
    reply.status(204).send();
  });
  app.get<{ Params: { id: string; buildId: string } }>('/templates/:id/builds/:buildId/status', async (req) => {
    const t = await svc.row(req.params.id);
    const info = await svc.job(req.params.buildId);
    if (info.template_id !== t.template_id && t.latest_job_id !== info.job_id) {
      throw notFound(`build ${req.params.buildId} of template ${t.template_id} not found`);
    }
    const status = jobStatus(info.status);
    return {
      templateID: t.template_id, buildID: info.job_id, status, logs: [],
      logEntries: info.progress.message ? [{ timestamp: info.updated_at, level: 'info', message: info.progress.message }] : [],
      ...(info.error ? { reason: { message: info.error, ...(info.phase ? { step: info.phase } : {}) } } : {}),
    };
  });
}

function e2bTemplate(t: TemplateRow, jobs: JobRow[]) {
  const lastBuilt = [...jobs].reverse().find((j) => j.status === 'BUILT');
  return {
    templateID: t.template_id, buildID: lastBuilt?.job_id ?? t.latest_job_id ?? '', ...names(t),
    cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb), diskSizeMB: Number(t.disk_size_mb),
    public: false, createdAt: iso(t.created_at), updatedAt: iso(t.updated_at), createdBy: null, lastSpawnedAt: null,
    spawnCount: 0, buildCount: jobs.length, buildStatus: templateStatus(t.status), envdVersion: '',
  };
}

function e2bBuild(t: TemplateRow, j: JobRow) {
  return {
    buildID: j.job_id, status: jobStatus(j.status), cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb),
    diskSizeMB: Number(t.disk_size_mb), createdAt: iso(j.created_at), updatedAt: iso(j.updated_at),
    ...(j.finished_at !== null ? { finishedAt: iso(j.finished_at) } : {}),
  };
}

/** A template that joined another template's build shows that build too. */
async function withForeignLatest(svc: TemplateService, t: TemplateRow, jobs: JobRow[]): Promise<JobRow[]> {
  if (!t.latest_job_id || jobs.some((j) => j.job_id === t.latest_job_id)) return jobs;
  const latest = await svc.jobRow(t.latest_job_id);
  return latest ? [...jobs, latest] : jobs;
}

const names = (t: TemplateRow) => ({ aliases: t.alias ? [t.alias] : [], names: t.alias ? [t.alias] : [] });
const iso = (ms: number) => new Date(Number(ms)).toISOString();

function templateStatus(s: string): BuildStatus {
  return s === 'ready' ? 'ready' : s === 'failed' ? 'error' : 'building';
}

function jobStatus(s: string): BuildStatus {
  return s === 'PENDING' ? 'waiting' : s === 'RUNNING' ? 'building' : s === 'BUILT' ? 'ready' : 'error';
}
