import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound } from '@svc/common';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import { checkNewSecret, checkResolveInput, checkSecretUpdate, SECRETS_RESOLVE_PATH } from '@svc/contracts/secrets';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { callerTeam } from '../teams/caller.ts';
import type { SecretService } from './service.ts';

// A wildcard, not `:secretID`: the router caps a parameter at 100 characters, and a name may have 128.
type RefParams = { Params: { '*': string } };

/**
 * E2B's `/secrets` routes (the gateway forwards them unchanged, with the team header) and the
 * egress proxy's resolve route. The operator (no team header) acts as the default team.
 */
export function registerSecretRoutes(app: FastifyInstance, service: SecretService, egressAdminToken: string | undefined): void {
  const teamOf = (req: FastifyRequest) => callerTeam(req) ?? DEFAULT_TEAM_ID;

  app.get<{ Querystring: { limit?: unknown; nextToken?: unknown } }>('/secrets', async (req, reply) => {
    const page = await service.list(teamOf(req), req.query);
    if (page.nextToken) reply.header('X-Next-Token', page.nextToken);
    return page.secrets;
  });
  app.post<{ Body: unknown }>('/secrets', async (req, reply) => {
    const input = checkNewSecret(req.body);
    const created = await service.create(teamOf(req), input);
    reply.status(201);
    return created;
  });
  app.get<RefParams>('/secrets/*', async (req) => service.get(teamOf(req), secretRef(req)));
  app.post<RefParams & { Body: unknown }>('/secrets/*', async (req) => {
    const input = checkSecretUpdate(req.body);
    return service.update(teamOf(req), secretRef(req), input);
  });
  app.delete<RefParams>('/secrets/*', async (req, reply) => {
    await service.delete(teamOf(req), secretRef(req));
    return reply.status(204).send();
  });

  app.post<{ Body: unknown }>(SECRETS_RESOLVE_PATH, async (req) => {
    requireEgressAdmin(req, egressAdminToken, 'resolve secrets');
    const input = checkResolveInput(req.body);
    return service.resolve(input.teamId, input.names);
  });
}

/** The one path segment after /secrets/: an id or a name. */
function secretRef(req: FastifyRequest<RefParams>): string {
  const ref = req.params['*'];
  if (!ref || ref.includes('/')) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  return ref;
}
