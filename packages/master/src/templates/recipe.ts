import type { BuildRequest, BuildSource } from '@svc/contracts/template-center';

/** What a template is built from, kept on the template row so a redo can rebuild it. */
export interface BuildRecipe {
  source: BuildSource;
  withSvcCa: boolean;
  /** 0 = fit the content plus headroom. */
  diskSizeMB: number;
}

export function buildRequest(recipe: BuildRecipe, ids: { jobId: string; templateId: string; artifactId: string; specHash: string }): BuildRequest {
  return { ...ids, source: recipe.source, withSvcCa: recipe.withSvcCa, diskSizeMB: recipe.diskSizeMB };
}

/** The job row's RequestJSON: the request as sent, without registry credentials. */
export function redactedRequestJson(req: BuildRequest): string {
  const source = req.source.kind === 'registry' && req.source.auth
    ? { ...req.source, auth: { username: req.source.auth.username, password: '[redacted]' } }
    : req.source;
  return JSON.stringify({ ...req, source });
}
