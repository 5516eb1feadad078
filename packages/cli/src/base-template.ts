import { JsonClient, SvcError } from '@svc/common';
import { CODE_INTERPRETER_READY_CMD, CODE_INTERPRETER_START_CMD } from '@svc/contracts/code-interpreter';
import type { JobAccepted, JobInfo, TemplateCreate, TemplateInfo } from '@svc/contracts/template-routes';
import { baseRootfsPath, CA_FINGERPRINT_ENV, caFingerprint, type RootfsFlavor } from '@svc/template-center';

export interface BaseTemplateOptions {
  masterUrl: string;
  /** cluster_token's header (docs/cluster.md): the master takes it on every route. */
  masterHeaders?: Record<string, string>;
  rebuild: boolean;
  say: (line: string) => void;
  /** The egress root CA the templates must trust (docs/egress.md); a template with another or none is built again. */
  egressCaPem?: string;
}

/** The templates `svc up` makes from Debian's packages: their alias, root filesystem and start command. */
const MADE_HERE: Record<MadeTemplate, { flavor: RootfsFlavor; start?: Pick<TemplateCreate, 'start_cmd' | 'ready_cmd'> }> = {
  base: { flavor: 'base' },
  // E2B's name for it: @e2b/code-interpreter creates sandboxes of `code-interpreter-v1` (docs/code-interpreter.md).
  'code-interpreter-v1': { flavor: 'code-interpreter', start: { start_cmd: CODE_INTERPRETER_START_CMD, ready_cmd: CODE_INTERPRETER_READY_CMD } },
};
export type MadeTemplate = 'base' | 'code-interpreter-v1';

/** A template `svc up` offers, made or found: its id, and the build to wait for when one was started. */
export interface MadeTemplateStart {
  alias: MadeTemplate;
  templateId: string;
  /** The build started for it; undefined when it was ready already. */
  jobId?: string;
}

/** `base`, ready: see startMadeTemplate; waits for its build. */
export async function ensureBaseTemplate(o: BaseTemplateOptions): Promise<string> {
  const started = await startMadeTemplate('base', o);
  if (started.jobId) await waitForMadeTemplate(started, o);
  return started.templateId;
}

/**
 * What a template of ours is made from: a root filesystem the template center makes from Debian's
 * packages, at the recipe this svc has (base-template.ts in the template center).
 */
function debianSource(flavor: RootfsFlavor): string {
  return `${flavor}@${baseRootfsPath({ flavor }).key}`;
}

/**
 * Makes sure a template `svc up` offers exists and is ready or building. Its root filesystem is
 * made by the template center from Debian's packages (once per machine, cached) as the build's
 * first phase, so the template exists, with its progress in `svc tpl status`, from the start
 * (docs/quickstart.md). One built from another recipe (an older package list), another start
 * command or without the current egress CA is built again.
 */
export async function startMadeTemplate(alias: MadeTemplate, o: BaseTemplateOptions): Promise<MadeTemplateStart> {
  const { flavor, start } = MADE_HERE[alias];
  const master = new JsonClient(o.masterUrl, { timeoutMs: 60_000, headers: o.masterHeaders ?? {} });
  const existing = await master.get<TemplateInfo>(`/svc/template/${alias}`).catch((e: SvcError) => {
    if (e.status === 404) return undefined;
    throw e;
  });
  const source = debianSource(flavor);
  // A template an older svc made from the same recipe's tarball is as current as one made now.
  const sameRootfs = existing?.source_image_ref === source || existing?.source_image_ref === baseRootfsPath({ flavor }).path;
  const current = sameRootfs
    && (existing?.start_cmd ?? null) === (start?.start_cmd ?? null) && (existing?.ready_cmd ?? null) === (start?.ready_cmd ?? null);
  const wantCa = o.egressCaPem ? `${CA_FINGERPRINT_ENV}=${caFingerprint(o.egressCaPem)}` : undefined;
  const caCurrent = !wantCa || !!existing?.image_info?.env?.includes(wantCa);
  if (existing?.status === 'ready' && current && caCurrent && !o.rebuild) return { alias, templateId: existing.template_id };
  if (existing?.status === 'ready' && !current) o.say(`${alias} template: its recipe or start command changed since it was built; building it again`);
  else if (existing?.status === 'ready' && !caCurrent) o.say(`${alias} template: it does not trust the egress proxy's CA yet; building it again`);
  if (existing) {
    // Removed before the new one is made (the alias is unique). Templates built on it keep it:
    // a ready one then stays in use as it is, which only a rebuild of those templates changes.
    const removed = await master.delete(`/svc/template/${existing.template_id}`).then(() => true, (err: Error) => {
      o.say(`${alias} template: ${existing.template_id} cannot be replaced (${err.message}); keeping it`);
      return false;
    });
    if (!removed) {
      if (existing.status === 'ready') return { alias, templateId: existing.template_id };
      throw new Error(`the ${alias} template ${existing.template_id} is ${existing.status} and cannot be removed to build it again`);
    }
  }
  const request: TemplateCreate = { debian_rootfs: source, alias, ...start };
  const created = await master.post<JobAccepted>('/svc/template', request);
  return { alias, templateId: created.template_id, jobId: created.job_id };
}

/**
 * Follows a build startMadeTemplate started, a line per phase and progress message; with
 * `quiet`, only its end. Throws with the build's reason when it failed.
 */
export async function waitForMadeTemplate(started: MadeTemplateStart, o: Pick<BaseTemplateOptions, 'masterUrl' | 'masterHeaders' | 'say'> & { quiet?: boolean; pollMs?: number }): Promise<void> {
  if (!started.jobId) return;
  const master = new JsonClient(o.masterUrl, { timeoutMs: 60_000, headers: o.masterHeaders ?? {} });
  if (!o.quiet) o.say(`${started.alias} template: building ${started.templateId} (job ${started.jobId})`);
  let shown = '';
  for (;;) {
    const job = await master.get<JobInfo>(`/svc/template/build/${started.jobId}/status`);
    const line = `${job.status}${job.phase ? `/${job.phase}` : ''}${job.progress?.message ? `: ${job.progress.message}` : ''}`;
    if (line !== shown && !o.quiet) o.say(`${started.alias} template: ${line}`);
    shown = line;
    if (job.status === 'BUILT') return;
    if (job.status === 'FAILED') throw new Error(`the ${started.alias} template failed to build (job ${started.jobId}): ${job.error ?? 'unknown reason'}`);
    await new Promise((r) => setTimeout(r, o.pollMs ?? 500));
  }
}
