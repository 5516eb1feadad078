import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { badRequest, ErrorCodes, forbidden, notFound, SvcError } from '@svc/common';
import { callerTeam } from '../../teams/caller.ts';
import type { TemplateCenterClient } from '@svc/contracts/template-center';
import type { ArtifactStore } from '../store/artifacts.ts';
import { relayFromTemplateCenter } from '../relay.ts';
import { documentRoute } from './document-route.ts';

/** A presigned URL this close to expiry is not handed out any more. */
const URL_EXPIRY_MARGIN_MS = 10 * 60_000;

/**
 * GET|HEAD /svc/template/artifact/download?artifact_id=: node agents pull artifacts through the
 * master. Legacy files are served from the master's disk, S3 artifacts are a redirect to the
 * presigned URL recorded at build time, everything else streams from the template center.
 */
export function registerDownloadRoute(app: FastifyInstance, artifacts: ArtifactStore, templateCenter: TemplateCenterClient): void {
  documentRoute(app)<{ Querystring: { artifact_id?: string } }>(['GET', 'HEAD'], '/svc/template/artifact/download', async (req, reply) => {
    // The gateway refuses a team's key here already (docs/security.md); the master holds to it too.
    if (callerTeam(req) !== undefined) throw forbidden('template artifacts are the operator\'s: whole root filesystems, for nodes');
    const id = req.query.artifact_id;
    if (!id) throw badRequest('artifact_id is required', ErrorCodes.badRequest);
    const a = await artifacts.get(id);
    if (!a) throw notFound(`artifact ${id} not found`);
    if (a.status !== 'READY') throw notFound(`artifact ${id} is ${a.status}, not downloadable`);
    const head = req.method === 'HEAD';
    reply.header('x-svc-artifact-sha256', a.sha256 ?? '');
    if (a.storage === 'legacy-local') return sendFile(reply, a.location!, head);
    if (a.download_url && (a.url_expires_at === null || Number(a.url_expires_at) > Date.now() + URL_EXPIRY_MARGIN_MS)) {
      return reply.redirect(a.download_url, 302);
    }
    return relayFromTemplateCenter(reply, templateCenter, id, head);
  });
}

async function sendFile(reply: FastifyReply, path: string, head: boolean): Promise<FastifyReply> {
  const st = await stat(path).catch((err: NodeJS.ErrnoException) => {
    // Only a file that is not there is "missing"; another failure (permissions, I/O) is the master's: a 500, logged.
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
    throw new SvcError(500, `the legacy artifact file cannot be read on this master: ${err.message}`);
  });
  if (!st?.isFile()) throw new SvcError(404, 'the legacy artifact file is missing on this master');
  reply.status(200).header('content-type', 'application/octet-stream').header('content-length', String(st.size));
  return reply.send(head ? undefined : createReadStream(path));
}
