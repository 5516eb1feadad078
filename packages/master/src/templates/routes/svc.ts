import type { FastifyInstance } from 'fastify';
import type { TemplateAlias, TemplateCreate, TemplateRef } from '@svc/contracts/template-routes';
import type { TemplateService } from '../service.ts';
import { documentRoute } from './document-route.ts';
import { callerTeam } from '../../teams/caller.ts';

type Id = { Params: { id: string } };

/** docs/api.md "Templates (svc shapes)". */
export function registerSvcTemplateRoutes(app: FastifyInstance, svc: TemplateService): void {
  const on = documentRoute(app);
  for (const path of ['/svc/template', '/svc/template/from-image'] as const) {
    on<{ Body: TemplateCreate }>('POST', path, async (req, reply) => {
      reply.status(202);
      return svc.create(req.body, { teamId: callerTeam(req) });
    });
  }
  on('GET', '/svc/template', async (req) => ({ templates: await svc.list(callerTeam(req)) }));
  on<{ Querystring: { job_id?: string } }>('GET', '/svc/template/from-image', async (req) => svc.job(req.query.job_id));
  on<{ Params: { jobId: string } }>('GET', '/svc/template/build/{jobId}/status', async (req) => svc.job(req.params.jobId));
  on<{ Body?: TemplateRef | null }>('POST', '/svc/template/redo', async (req, reply) => {
    reply.status(202);
    return svc.redo(req.body?.template_id);
  });
  on<{ Body?: TemplateRef | null }>('POST', '/svc/template/migrate', async (req) => svc.migrate(req.body?.template_id));
  on<Id>('GET', '/svc/template/{id}', async (req) => svc.get(req.params.id));
  on<Id>('DELETE', '/svc/template/{id}', async (req, reply) => {
    await svc.delete(req.params.id);
    return reply.status(204).send();
  });
  on<Id & { Body?: TemplateAlias | null }>('PUT', '/svc/template/{id}/alias', async (req) => svc.setAlias(req.params.id, req.body?.alias));
}
