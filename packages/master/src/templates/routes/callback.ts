import type { FastifyInstance } from 'fastify';
import { SvcError, type SvcConfig } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import { CALLBACK_TOKEN_HEADER } from '@svc/contracts/template-center';
import { TEMPLATE_CALLBACK_ROUTES as R, verifyCallbackToken } from '@svc/contracts/template-callback';
import { guardedRoutes } from '../../route-guard.ts';
import type { BuildJobs } from '../build-jobs.ts';

/**
 * The template center's status callback (TEMPLATE_CALLBACK_ROUTES). docs/design.md, "Authentication and secrets":
 * constant-time token check before the body, 401 on mismatch, 503 when no token is configured (unless the
 * development opt-in), real statuses.
 */
export function registerCallbackRoute(app: FastifyInstance, cfg: SvcConfig['template_center'], builds: BuildJobs): void {
  const checkToken = (headers: Record<string, string | string[] | undefined>) => {
    const check = verifyCallbackToken(headers[CALLBACK_TOKEN_HEADER], cfg.callback_token, cfg.insecure_no_token);
    if (!check.ok) throw new SvcError(check.status, check.message);
  };
  guardedRoutes(app, (req) => checkToken(req.headers), (scope) => serve(scope, R.status, async (req, reply) => {
    await builds.onReport(req.params.jobId, req.body);
    return reply.status(204).send();
  }));
}
