import { JsonClient, SvcError } from '@svc/common';
import type { JobAccepted, JobInfo, TemplateCreate, TemplateInfo } from '@svc/contracts/template-routes';
import { baseRootfsPath, buildBaseRootfs } from '@svc/template-center';

export interface BaseTemplateOptions {
  masterUrl: string;
  rebuild: boolean;
  say: (line: string) => void;
}

/**
 * Makes sure the `base` template exists and is ready: its root filesystem is built from Debian's
 * packages once per machine (cached) and goes through the same build pipeline as any image.
 * A `base` built from another recipe (an older package list) is built again.
 */
export async function ensureBaseTemplate(o: BaseTemplateOptions): Promise<string> {
  const master = new JsonClient(o.masterUrl, { timeoutMs: 60_000 });
  const existing = await master.get<TemplateInfo>('/svc/template/base').catch((e: SvcError) => {
    if (e.status === 404) return undefined;
    throw e;
  });
  const current = existing?.source_image_ref === baseRootfsPath().path;
  if (existing?.status === 'ready' && current && !o.rebuild) return existing.template_id;
  if (existing?.status === 'ready' && !current) o.say('base template: its recipe changed since it was built; building it again');

  let lastPhase = '';
  const tar = await buildBaseRootfs({
    rebuild: o.rebuild,
    onProgress: (p: { phase: string; message?: string }) => {
      if (p.phase !== lastPhase) { o.say(`base template: ${p.phase}${p.message ? ` (${p.message})` : ''}`); lastPhase = p.phase; }
    },
  });
  if (existing) {
    await master.delete(`/svc/template/${existing.template_id}`).catch((err: Error) => o.say(`base template: could not remove the old ${existing.template_id} (${err.message}); building the new one anyway`));
  }
  const request: TemplateCreate = { rootfs_tar: tar.path, alias: 'base' };
  const created = await master.post<JobAccepted>('/svc/template', request);
  o.say(`base template: building ${created.template_id} (job ${created.job_id})`);
  let shown = '';
  for (;;) {
    const job = await master.get<JobInfo>(`/svc/template/build/${created.job_id}/status`);
    const line = `${job.status}${job.phase ? `/${job.phase}` : ''}`;
    if (line !== shown) { o.say(`base template: ${line}`); shown = line; }
    if (job.status === 'BUILT') return created.template_id;
    if (job.status === 'FAILED') throw new Error(`the base template failed to build: ${job.error ?? 'unknown reason'}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
