import type { FastifyInstance } from 'fastify';
import { SvcError, type SvcConfig } from '@svc/common';
import { CALLBACK_TOKEN_HEADER, type JobStatusReport } from '@svc/contracts/template-center';
import { verifyCallbackToken } from '@svc/contracts/template-callback';
import type { BuildJobs } from '../build-jobs.ts';

/**
 * The template center's status callback. docs/design.md, "Authentication and secrets": constant-time token check,
 * 401 on mismatch, 503 when no token is configured (unless the development opt-in), real statuses.
 */
export function registerCallbackRoute(app: FastifyInstance, cfg: SvcConfig['template_center'], builds: BuildJobs): void {
  app.post<{ Params: { jobId: string }; Body: JobStatusReport }>('/internal/template/jobs/:jobId/status', async (req, reply) => {
    const check = verifyCallbackToken(req.headers[CALLBACK_TOKEN_HEADER], cfg.callback_token, cfg.insecure_no_token);
    if (!check.ok) throw new SvcError(check.status, check.message);
    await builds.onReport(req.params.jobId, req.body);
    reply.status(204).send();
  });
}
