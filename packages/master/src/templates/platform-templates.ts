import type { TemplateStore } from './store/templates.ts';
import type { TemplateRow } from './tables.ts';
import { templateBuildUnavailable, templateNotFound } from './errors.ts';

/** How often a create waiting for a template the platform is building reads it again. */
const PLATFORM_TEMPLATE_POLL_MS = 500;

/**
 * Whether svc makes this template for itself: from Debian's packages (`base`,
 * `code-interpreter-v1`), or with the builder on the operator's address (`mcp-gateway`, built
 * from `base` by `svc up`; docs/mcp.md), which makes it public (template-owner.ts).
 */
export function isPlatformTemplate(t: Pick<TemplateRow, 'source_kind' | 'public'>): boolean {
  return t.source_kind === 'debian_rootfs' || (t.source_kind === 'builder' && Number(t.public) === 1);
}

/**
 * A template the platform makes for itself (`svc up` builds `code-interpreter-v1` in the
 * background, docs/quickstart.md): a create that finds it still building waits for it within
 * the create timeout, and one that finds its build failed is the platform's failure, a 503
 * naming the build and where its log is, never the user's 400.
 */
export async function platformTemplateReady(templates: Pick<TemplateStore, 'get'>, first: TemplateRow, createTimeoutSec: number): Promise<TemplateRow> {
  const until = Date.now() + createTimeoutSec * 1000;
  let t: TemplateRow | undefined = first;
  while (t && t.status === 'building' && !t.artifact_id && Date.now() < until) {
    await new Promise((r) => setTimeout(r, PLATFORM_TEMPLATE_POLL_MS));
    t = await templates.get(first.template_id);
  }
  if (!t) throw templateNotFound(first.alias ?? first.template_id);
  const name = t.alias ?? t.template_id;
  const log = `svc tpl status ${t.latest_job_id ?? ''} or GET /templates/${t.template_id}/builds/${t.latest_job_id ?? ''}/status; the template center's log has the rest`;
  if (t.status === 'failed' && !t.artifact_id) {
    throw templateBuildUnavailable(`template ${name} could not be built (build ${t.latest_job_id}: ${t.error ?? 'no reason recorded'}); its status and log: ${log}`);
  }
  if (t.status === 'building' && !t.artifact_id) {
    throw templateBuildUnavailable(`template ${name} is still being built (build ${t.latest_job_id}) after ${createTimeoutSec} s; try again shortly, or follow it: ${log}`, 10);
  }
  return t;
}
