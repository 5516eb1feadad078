import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { notFound, relayAnswer, SvcError, traceClientCall, UnreachableError } from '@svc/common';
import { serve } from '@svc/contracts/route-table';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import {
  encodeVolumeHeader, MASTER_VOLUME_ROUTES as R, VOLUME_CONTENT_KINDS, VOLUME_CONTENT_PATH, VOLUME_HEADER, type VolumeContentKind,
} from '@svc/contracts/volumes';
import { callerTeam } from '../teams/caller.ts';
import type { VolumeDbRow } from './repo.ts';
import type { VolumeService } from './service.ts';

// Wildcards, not `:volumeID`: the router caps a parameter at 100 characters, and a name may have 128.
type RefParams = { Params: { '*': string } };

/** Headers of a content answer passed back to the caller. */
const PASS_BACK = ['content-type', 'content-length', 'content-disposition', 'last-modified'];

/**
 * The master's volume routes (docs/volumes.md): MASTER_VOLUME_ROUTES, and the content API under
 * VOLUME_CONTENT_PATH (packages/contracts/src/volumes.ts). The gateway maps E2B's /volumes onto
 * /svc/volume and /volumecontent onto /svc/volumecontent, with the team header. No team header:
 * the operator, whose volumes are the default team's.
 */
export async function registerVolumeRoutes(app: FastifyInstance, service: VolumeService): Promise<void> {
  serve(app, R.list, async (req) => service.list(callerTeam(req)));
  serve(app, R.create, async (req, reply) => {
    const name = req.body?.name;
    const driver = req.body?.driver;
    const created = await service.create(callerTeam(req) ?? DEFAULT_TEAM_ID, { ...(name !== undefined ? { name } : {}), ...(driver !== undefined ? { driver } : {}) });
    return reply.status(201).send(created);
  });
  serve(app, R.refcounts, async () => service.refcounts());
  serve(app, R.get, async (req) => service.get(callerTeam(req), refOf(req)));
  serve(app, R.destroy, async (req, reply) => {
    await service.destroy(callerTeam(req), refOf(req));
    return reply.status(204).send();
  });

  // The content API passes bodies through untouched (uploads stream): no parser in this scope.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));
    scope.all<RefParams>(`${VOLUME_CONTENT_PATH}/*`, async (req, reply) => proxyContent(req, reply, service));
  });
}

function refOf(req: FastifyRequest & { params: { '*': string } }): string {
  const ref = req.params['*'];
  if (!ref || ref.includes('/')) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  return ref;
}

/**
 * One content call: authorized here (team or volume token), served by a node agent that
 * attaches the volume for the call (the plugin's Attach gives its host path there).
 */
async function proxyContent(req: FastifyRequest<RefParams>, reply: FastifyReply, service: VolumeService): Promise<FastifyReply> {
  const [ref, kind, ...rest] = req.params['*'].split('/');
  if (!ref || rest.length || !VOLUME_CONTENT_KINDS.includes(kind as VolumeContentKind)) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
  const auth = req.headers.authorization;
  const bearer = typeof auth === 'string' && /^bearer\s+/i.test(auth) ? auth.replace(/^bearer\s+/i, '').trim() : undefined;
  const row = await service.authorizeContent(ref, callerTeam(req), bearer);
  // Claimed until the node answers: from then on the node lists the volume as held for the
  // call, which a DELETE asks about; before it, the claim is what the DELETE sees.
  const res = await service.whileAttaching([row.volume_id], () => askNode(req, service, row, kind));
  return relayAnswer(req, reply, res, PASS_BACK);
}

/** The content call, sent to a node that holds the volume or attaches it for the call. */
async function askNode(req: FastifyRequest<RefParams>, service: VolumeService, row: VolumeDbRow, kind: string): Promise<Response> {
  const node = await service.contentNode(row.volume_id);
  const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
  const headers: Record<string, string> = { ...node.headers, [VOLUME_HEADER]: encodeVolumeHeader({ volumeId: row.volume_id, driver: row.driver, privateData: row.private_data }) };
  for (const h of ['content-type', 'content-length'] as const) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE';
  try {
    const url = `${node.baseUrl}/v1/volume-content/${encodeURIComponent(row.volume_id)}/${kind}${query}`;
    // When tracing is on, a CLIENT span whose `traceparent` goes along (tracing.ts).
    return await traceClientCall(req.method, url, headers, () => fetch(url, {
      method: req.method, headers, ...(hasBody ? { body: req.raw as unknown as RequestInit['body'], duplex: 'half' } : {}),
    } as RequestInit), (r) => r.status);
  } catch (err) {
    const why = ((err as Error).cause as Error)?.message ?? (err as Error).message;
    throw new UnreachableError(`node ${node.nodeId} did not answer the volume content call: ${why}`, `node ${node.nodeId} did not answer the volume content call; retry shortly`);
  }
}
