import type { FastifyInstance } from 'fastify';
import type { TemplateService } from '../service.ts';
import { oneQueryValue } from './query.ts';

type IdParams = { Params: { id: string } };

/** docs/api.md "Templates (svc shapes)". */
export function registerSvcTemplateRoutes(app: FastifyInstance, svc: TemplateService): void {
  for (const url of ['/svc/template', '/svc/template/from-image']) {
    app.post(url, async (req, reply) => {
      reply.status(202);
      return svc.create(req.body);
    });
  }
  app.get('/svc/template', async () => ({ templates: await svc.list() }));
  app.get<{ Querystring: { job_id?: string | string[] } }>('/svc/template/from-image', async (req) => svc.job(oneQueryValue(req.query.job_id, 'job_id')));
  app.get<{ Params: { jobId: string } }>('/svc/template/build/:jobId/status', async (req) => svc.job(req.params.jobId));
  app.post('/svc/template/redo', async (req, reply) => {
    reply.status(202);
    return svc.redo(req.body);
  });
  app.post('/svc/template/migrate', async (req) => svc.migrate(req.body));
  app.get<IdParams>('/svc/template/:id', async (req) => svc.get(req.params.id));
  app.delete<IdParams>('/svc/template/:id', async (req, reply) => {
    await svc.delete(req.params.id);
    reply.status(204).send();
  });
  app.put<IdParams>('/svc/template/:id/alias', async (req) => svc.setAlias(req.params.id, req.body));
}
