import type { FastifyInstance } from 'fastify';
import type { E2bAssignTags, E2bBuildRequest, E2bBuildStart, E2bDeleteTags } from '@svc/contracts/template-routes';
import { documentRoute } from '../templates/routes/document-route.ts';
import { withTemplateErrors } from '../templates/routes/error-scope.ts';
import type { BuildService } from './service.ts';
import { callerTeam } from '../teams/caller.ts';

/** E2B's template builder routes (docs/templates.md, "The builder"); the status route is the template module's. */
export function registerBuildRoutes(app: FastifyInstance, builds: BuildService): void {
  withTemplateErrors(app, (scope) => {
    const on = documentRoute(scope);
    on<{ Body: E2bBuildRequest }>('POST', '/v3/templates', async (req, reply) => {
      reply.status(202);
      return builds.request(req.body, callerTeam(req));
    });
    on<{ Params: { templateID: string; buildID: string }; Body: E2bBuildStart }>('POST', '/v2/templates/{templateID}/builds/{buildID}', async (req, reply) => {
      await builds.start(req.params.templateID, req.params.buildID, req.body);
      return reply.status(202).send();
    });
    on<{ Body: E2bAssignTags }>('POST', '/templates/tags', async (req, reply) => {
      reply.status(201);
      return builds.assignTags(req.body.target, req.body.tags);
    });
    on<{ Body: E2bDeleteTags }>('DELETE', '/templates/tags', async (req, reply) => {
      await builds.removeTags(req.body.name, req.body.tags);
      return reply.status(204).send();
    });
    on<{ Params: { templateID: string; hash: string } }>('GET', '/templates/{templateID}/files/{hash}', async (req, reply) => {
      // The gateway passes on the address the SDK used: the upload URL is on it.
      const proto = req.headers['x-forwarded-proto'] ?? req.protocol;
      const host = req.headers['x-forwarded-host'] ?? req.headers.host;
      reply.status(201);
      return builds.filesLink(req.params.templateID, req.params.hash, `${proto}://${host}`, callerTeam(req));
    });
    on<{ Params: { templateID: string } }>('GET', '/templates/{templateID}/tags', async (req) => builds.tags(req.params.templateID));
    type LogsQuery = { cursor?: number; direction?: 'forward' | 'backward'; level?: string; limit?: number };
    on<{ Params: { templateID: string; buildID: string }; Querystring: LogsQuery }>('GET', '/templates/{templateID}/builds/{buildID}/logs', async (req) => builds.logs(req.params.templateID, req.params.buildID, req.query));
  });
}
