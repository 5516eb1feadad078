import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { errorFromResponse } from '@svc/common';
import type { TemplateCenterClient } from '@svc/contracts/template-center';

/**
 * Answers with what the template center's store holds under `id` (a template image or a snapshot
 * layer): its bytes streamed through, or the redirect to a presigned URL when the store is S3.
 */
export async function relayFromTemplateCenter(reply: FastifyReply, templateCenter: TemplateCenterClient, id: string, head: boolean): Promise<FastifyReply> {
  const res = await templateCenter.download(id, head ? 'HEAD' : 'GET');
  const location = res.headers.get('location');
  if (res.status >= 300 && res.status < 400 && location) {
    await res.body?.cancel();
    return reply.redirect(location, 302);
  }
  if (!res.ok) throw errorFromResponse(res, await res.text());
  reply.status(200).header('content-type', res.headers.get('content-type') ?? 'application/octet-stream');
  const length = res.headers.get('content-length');
  if (length) reply.header('content-length', length);
  if (head || !res.body) {
    await res.body?.cancel();
    return reply.send();
  }
  return reply.send(Readable.fromWeb(res.body as never));
}
