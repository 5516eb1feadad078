import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound } from '@svc/common';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import { serve } from '@svc/contracts/route-table';
import { checkNewSecret, checkSecretUpdate, SECRET_ROUTES as R } from '@svc/contracts/secrets';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { guardedRoutes } from '../route-guard.ts';
import { callerTeam } from '../teams/caller.ts';
import type { SecretService } from './service.ts';

/**
 * E2B's `/secrets` routes (the gateway forwards them unchanged, with the team header) and the
 * egress proxy's resolve route: SECRET_ROUTES (packages/contracts/src/secrets.ts). The operator
 * (no team header) acts as the default team.
 */
export function registerSecretRoutes(app: FastifyInstance, service: SecretService, egressAdminToken: string | undefined): void {
  const teamOf = (req: FastifyRequest) => callerTeam(req) ?? DEFAULT_TEAM_ID;

  serve(app, R.list, async (req, reply) => {
    const page = await service.list(teamOf(req), req.query);
    if (page.nextToken) reply.header('X-Next-Token', page.nextToken);
    return page.secrets;
  });
  serve(app, R.create, async (req, reply) => {
    const input = checkNewSecret(req.body);
    const created = await service.create(teamOf(req), input);
    reply.status(201);
    return created;
  });
  serve(app, R.get, async (req) => service.get(teamOf(req), secretRef(req)));
  serve(app, R.update, async (req) => {
    const input = checkSecretUpdate(req.body);
    return service.update(teamOf(req), secretRef(req), input);
  });
  serve(app, R.delete, async (req, reply) => {
    await service.delete(teamOf(req), secretRef(req));
    return reply.status(204).send();
  });

  // The token is checked before the body: a caller without it learns nothing of the body's rules.
  guardedRoutes(app, (req) => requireEgressAdmin(req, egressAdminToken, 'resolve secrets'), (scope) => serve(scope, R.resolve, async (req) => (
    service.resolve(req.body.teamId, req.body.names)
  )));
}

/** The one path segment after /secrets/: an id or a name. */
function secretRef(req: FastifyRequest & { params: { '*': string } }): string {
  const ref = req.params['*'];
  if (!ref || ref.includes('/')) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  return ref;
}
