import { JsonClient, SvcError } from '@svc/common';
import { CODE_INTERPRETER_READY_CMD, CODE_INTERPRETER_START_CMD } from '@svc/contracts/code-interpreter';
import type { JobAccepted, JobInfo, TemplateCreate, TemplateInfo } from '@svc/contracts/template-routes';
import { baseRootfsPath, buildBaseRootfs, CA_FINGERPRINT_ENV, caFingerprint, type RootfsFlavor } from '@svc/template-center';

export interface BaseTemplateOptions {
  masterUrl: string;
  rebuild: boolean;
  say: (line: string) => void;
  /** The egress root CA the templates must trust (docs/egress.md); a template with another or none is built again. */
  egressCaPem?: string;
}

/** The templates `svc up` makes from Debian's packages: their alias, root filesystem and start command. */
const MADE_HERE: Record<'base' | 'code-interpreter-v1', { flavor: RootfsFlavor; start?: Pick<TemplateCreate, 'start_cmd' | 'ready_cmd'> }> = {
  base: { flavor: 'base' },
  // E2B's name for it: @e2b/code-interpreter creates sandboxes of `code-interpreter-v1` (docs/code-interpreter.md).
  'code-interpreter-v1': { flavor: 'code-interpreter', start: { start_cmd: CODE_INTERPRETER_START_CMD, ready_cmd: CODE_INTERPRETER_READY_CMD } },
};

/** `base`: see ensureMadeTemplate. */
export function ensureBaseTemplate(o: BaseTemplateOptions): Promise<string> {
  return ensureMadeTemplate('base', o);
}

/** `code-interpreter-v1`: see ensureMadeTemplate. */
export function ensureCodeInterpreterTemplate(o: BaseTemplateOptions): Promise<string> {
  return ensureMadeTemplate('code-interpreter-v1', o);
}

/**
 * Makes sure a template `svc up` offers exists and is ready: its root filesystem is built from
 * Debian's packages once per machine (cached) and goes through the same build pipeline as any
 * image. One built from another recipe (an older package list) is built again.
 */
async function ensureMadeTemplate(alias: keyof typeof MADE_HERE, o: BaseTemplateOptions): Promise<string> {
  const { flavor, start } = MADE_HERE[alias];
  const master = new JsonClient(o.masterUrl, { timeoutMs: 60_000 });
  const existing = await master.get<TemplateInfo>(`/svc/template/${alias}`).catch((e: SvcError) => {
    if (e.status === 404) return undefined;
    throw e;
  });
  const current = existing?.source_image_ref === baseRootfsPath({ flavor }).path
    && (existing.start_cmd ?? null) === (start?.start_cmd ?? null) && (existing.ready_cmd ?? null) === (start?.ready_cmd ?? null);
  const wantCa = o.egressCaPem ? `${CA_FINGERPRINT_ENV}=${caFingerprint(o.egressCaPem)}` : undefined;
  const caCurrent = !wantCa || !!existing?.image_info?.env?.includes(wantCa);
  if (existing?.status === 'ready' && current && caCurrent && !o.rebuild) return existing.template_id;
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
      if (existing.status === 'ready') return existing.template_id;
      throw new Error(`the ${alias} template ${existing.template_id} is ${existing.status} and cannot be removed to build it again`);
    }
  }

  let lastPhase = '';
  const tar = await buildBaseRootfs({
    flavor,
    rebuild: o.rebuild,
    onProgress: (p: { phase: string; message?: string }) => {
      if (p.phase !== lastPhase) { o.say(`${alias} template: ${p.phase}${p.message ? ` (${p.message})` : ''}`); lastPhase = p.phase; }
    },
  });
  const request: TemplateCreate = { rootfs_tar: tar.path, alias, ...start };
  const created = await master.post<JobAccepted>('/svc/template', request);
  o.say(`${alias} template: building ${created.template_id} (job ${created.job_id})`);
  let shown = '';
  for (;;) {
    const job = await master.get<JobInfo>(`/svc/template/build/${created.job_id}/status`);
    const line = `${job.status}${job.phase ? `/${job.phase}` : ''}`;
    if (line !== shown) { o.say(`${alias} template: ${line}`); shown = line; }
    if (job.status === 'BUILT') return created.template_id;
    if (job.status === 'FAILED') throw new Error(`the ${alias} template failed to build: ${job.error ?? 'unknown reason'}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
