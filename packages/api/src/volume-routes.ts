import type { FastifyInstance } from 'fastify';
import { pathTo } from '@svc/contracts/route-table';
import { MASTER_VOLUME_ROUTES, masterVolumePath, VOLUME_CONTENT_PATH } from '@svc/contracts/volumes';
import { forwardToMaster } from './forward.ts';
import type { MasterAddress } from './master-address.ts';

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
 * a scope without body parsers.
 */
export function registerVolumeContentRoutes(scope: FastifyInstance, master: MasterAddress): void {
  scope.all<{ Params: { '*': string } }>('/volumecontent/*', (req, reply) => forwardToMaster(req, reply, master, {
    raw: true, path: `${VOLUME_CONTENT_PATH}/${req.params['*'].split('/').map(encodeURIComponent).join('/')}`, passHeaders: ['authorization'],
  }));
}
