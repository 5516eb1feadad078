import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientPrefix } from '@svc/common';
import { pathTo } from '@svc/contracts/route-table';
import { MASTER_VOLUME_ROUTES, masterVolumePath, VOLUME_CONTENT_PATH } from '@svc/contracts/volumes';
import { isVolumeContentWithToken, presentedKey } from './auth.ts';
import { forwardToMaster } from './forward.ts';
import type { MasterAddress } from './master-address.ts';
import type { VolumeTokenBudget } from './volume-token-budget.ts';

/**
 * E2B's /volumes routes, forwarded to the master's /svc/volume with the caller's team
 * (docs/volumes.md). Ids and names go in one wildcard: the router caps a parameter at 100
 * characters, and a name may have 128.
 */
export function registerVolumeRoutes(app: FastifyInstance, master: MasterAddress): void {
  app.get('/volumes', (req, reply) => forwardToMaster(req, reply, master, { path: pathTo(MASTER_VOLUME_ROUTES.list) }));
  app.post('/volumes', (req, reply) => forwardToMaster(req, reply, master, { path: pathTo(MASTER_VOLUME_ROUTES.create) }));
  for (const method of ['GET', 'DELETE'] as const) {
    app.route<{ Params: { '*': string } }>({
      method, url: '/volumes/*',
      handler: (req, reply) => forwardToMaster(req, reply, master, { path: masterVolumePath(req.params['*']) }),
    });
  }
}

/**
 * E2B's volume content API (/volumecontent/{volumeID}/dir|file|path), passed through as bytes
 * to the master, which checks the volume's token and has a node serve the call. Register it in
 * a scope without body parsers. A call with the volume's token is held to the client's
 * failed-check budget (volume-token-budget.ts).
 */
export function registerVolumeContentRoutes(
  scope: FastifyInstance, master: MasterAddress, tokens: { budget: VolumeTokenBudget; clientAddress: (req: FastifyRequest) => string },
): void {
  scope.all<{ Params: { '*': string } }>('/volumecontent/*', async (req, reply) => {
    const token = isVolumeContentWithToken(req, req.url.split('?')[0]!) ? presentedKey(req) : undefined;
    const client = clientPrefix(tokens.clientAddress(req));
    if (token !== undefined) tokens.budget.admit(client, token);
    await forwardToMaster(req, reply, master, {
      raw: true, path: `${VOLUME_CONTENT_PATH}/${req.params['*'].split('/').map(encodeURIComponent).join('/')}`, passHeaders: ['authorization'],
    });
    if (token !== undefined) tokens.budget.settle(client, token, reply.statusCode);
    return reply;
  });
}
