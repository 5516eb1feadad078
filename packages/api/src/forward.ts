import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { SvcError } from '@svc/common';

const PASS_RESPONSE_HEADERS = ['content-type', 'content-length', 'location', 'etag', 'retry-after', 'x-next-token', 'accept-ranges', 'content-range'];

/** Passes a request to the master unchanged (template routes), streaming the answer back. */
export async function forwardToMaster(req: FastifyRequest, reply: FastifyReply, masterUrl: string): Promise<FastifyReply> {
  const headers: Record<string, string> = {};
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  if (typeof req.headers.range === 'string') headers.range = req.headers.range;
  let res: Response;
  try {
    res = await fetch(masterUrl + req.url, {
      method: req.method,
      headers,
      body: req.body === undefined || req.method === 'GET' || req.method === 'HEAD' ? undefined : JSON.stringify(req.body),
      redirect: 'manual',
    });
  } catch (err) {
    throw new SvcError(503, `master unavailable: ${((err as Error).cause as Error)?.message ?? (err as Error).message}`, { headers: { 'Retry-After': '2' } });
  }
  reply.status(res.status);
  for (const h of PASS_RESPONSE_HEADERS) {
    const v = res.headers.get(h);
    if (v) reply.header(h, v);
  }
  if (!res.body || req.method === 'HEAD' || res.status === 204) return reply.send();
  return reply.send(Readable.fromWeb(res.body as never));
}
