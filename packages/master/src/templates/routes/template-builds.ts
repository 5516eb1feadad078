import { ENVD_VERSION } from '@svc/contracts/envd-version';
import type { E2bBuildStatus, E2bTemplate, E2bTemplateBuild } from '@svc/contracts/template-routes';
import type { BuilderBuild, BuilderStatus } from '../builder-port.ts';
import type { TemplateService } from '../service.ts';
import type { JobRow, TemplateRow } from '../tables.ts';

/**
 * Every build of a template, newest first, as E2B's TemplateWithBuilds lists them: its build jobs
 * (a template that joined another template's build shows that build too) and the builds the
 * builder (E2B's Template.build) made of it. Each kind keeps its own table, so both are read.
 */
export async function templateBuilds(svc: TemplateService, builder: BuilderStatus | undefined, t: TemplateRow): Promise<E2bTemplateBuild[]> {
  const jobs = await withForeignLatest(svc, t, await svc.jobsOf(t.template_id));
  const built = builder ? await builder.buildsOf(t.template_id) : [];
  const all = [...jobs.map((j) => fromJob(t, j)), ...built.map((b) => fromBuilder(t, b))];
  // Ties (the same millisecond) by id, so the order is the same on every answer.
  return all.sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.buildID.localeCompare(a.buildID));
}

/**
 * The list's build fields, as E2B's GET /templates gives them: `buildID` the newest ready build
 * (else the newest build, so a template still building or failed names the build to look at),
 * `buildStatus` the newest build's, `envdVersion` the newest ready build's. A template with no
 * build at all (a legacy one) shows its own status.
 */
export function buildSummary(t: TemplateRow, newestFirst: E2bTemplateBuild[]): Pick<E2bTemplate, 'buildID' | 'buildCount' | 'buildStatus' | 'envdVersion'> {
  const newest = newestFirst[0];
  const ready = newestFirst.find((b) => b.status === 'ready');
  return {
    buildID: ready?.buildID ?? newest?.buildID ?? t.latest_job_id ?? '',
    buildCount: newestFirst.length,
    buildStatus: newest?.status ?? templateStatus(t.status),
    envdVersion: ready?.envdVersion ?? '',
  };
}

/** A build job's status in E2B's words (the status route's mapping). */
export function jobStatus(s: string): E2bBuildStatus {
  return s === 'PENDING' ? 'waiting' : s === 'RUNNING' ? 'building' : s === 'BUILT' ? 'ready' : 'error';
}

function templateStatus(s: string): E2bBuildStatus {
  return s === 'ready' ? 'ready' : s === 'failed' ? 'error' : 'building';
}

/** A build job builds the template's image at the template's sizes (jobs record none of their own). */
function fromJob(t: TemplateRow, j: JobRow): E2bTemplateBuild {
  return build(jobStatus(j.status), {
    buildId: j.job_id, cpuCount: Number(t.cpu_count), memoryMB: Number(t.memory_mb),
    createdAt: Number(j.created_at), updatedAt: Number(j.updated_at), finishedAt: j.finished_at === null ? null : Number(j.finished_at),
  }, t);
}

/** A builder build's sandbox has the template's disk: builds record cpu and memory only. */
function fromBuilder(t: TemplateRow, b: BuilderBuild): E2bTemplateBuild {
  return build(b.status, b, t);
}

function build(status: E2bBuildStatus, b: Omit<BuilderBuild, 'status'>, t: TemplateRow): E2bTemplateBuild {
  return {
    buildID: b.buildId, status, cpuCount: b.cpuCount, memoryMB: b.memoryMB, diskSizeMB: Number(t.disk_size_mb),
    createdAt: iso(b.createdAt), updatedAt: iso(b.updatedAt),
    ...(b.finishedAt !== null ? { finishedAt: iso(b.finishedAt) } : {}),
    // envd is not in the template's files: every sandbox runs the node agent's, this version.
    ...(status === 'ready' ? { envdVersion: ENVD_VERSION } : {}),
  };
}

async function withForeignLatest(svc: TemplateService, t: TemplateRow, jobs: JobRow[]): Promise<JobRow[]> {
  if (!t.latest_job_id || jobs.some((j) => j.job_id === t.latest_job_id)) return jobs;
  const latest = await svc.jobRow(t.latest_job_id);
  return latest ? [...jobs, latest] : jobs;
}

const iso = (ms: number) => new Date(ms).toISOString();
