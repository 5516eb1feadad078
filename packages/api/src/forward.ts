import type { FastifyReply, FastifyRequest } from 'fastify';
import { relayAnswer, SvcError, traceClientCall, UnreachableError } from '@svc/common';
import { pathRefusal } from './path-guard.ts';
import { teamHeaders } from './request-identity.ts';
import type { MasterAddress } from './master-address.ts';

const PASS_RESPONSE_HEADERS = ['content-type', 'content-length', 'location', 'etag', 'retry-after', 'x-next-token', 'accept-ranges', 'content-range'];

export interface ForwardOptions {
  /** The request's own bytes stream through (an upload) instead of its parsed JSON. */
  raw?: boolean;
  /** The master's path for it (the query string is kept); default the request's own. */
  path?: string;
  /** Request headers passed on as they came (the volume content API's Authorization). */
  passHeaders?: string[];
}

/**
 * Passes a request to the master unchanged (template routes), streaming the answer back. A JSON
 * body is passed as parsed; with `raw` the request's own bytes stream through (an upload).
 */
export async function forwardToMaster(req: FastifyRequest, reply: FastifyReply, master: MasterAddress, opts: ForwardOptions = {}): Promise<FastifyReply> {
  const headers: Record<string, string> = {
    ...master.headers,
    // The master builds URLs the SDK will call (upload links) on the address the SDK used.
    'x-forwarded-host': firstValue(req.headers['x-forwarded-host']) ?? req.headers.host ?? '',
    'x-forwarded-proto': firstValue(req.headers['x-forwarded-proto']) ?? req.protocol,
    // The team the key speaks for; a team header the client sent is never passed on.
    ...teamHeaders(req),
  };
  if (typeof req.headers.range === 'string') headers.range = req.headers.range;
  for (const h of opts.passHeaders ?? []) {
    const v = req.headers[h];
    if (typeof v === 'string') headers[h] = v;
  }
  let body: string | NodeJS.ReadableStream | undefined;
  const bodyless = req.method === 'GET' || req.method === 'HEAD' || req.method === 'DELETE';
  if (opts.raw && !bodyless) {
    for (const h of ['content-type', 'content-length'] as const) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
    body = req.raw;
  } else if (opts.raw) {
    // Nothing to pass: the request has no body.
  } else if (req.body !== undefined && req.method !== 'GET' && req.method !== 'HEAD') {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(req.body);
  }
  const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
  const target = opts.path === undefined ? req.url : opts.path + query;
  // The path a route built from decoded parameters is checked again as the master will read it:
  // fetch resolves a dot segment in it into another route of the master's (path-guard.ts).
  const refused = pathRefusal(target);
  if (refused) throw new SvcError(400, refused);
  const url = master.url + target;
  let res: Response;
  try {
    // When tracing is on, a CLIENT span whose `traceparent` goes along (tracing.ts).
    res = await traceClientCall(req.method, url, headers, () => fetch(url, {
      method: req.method,
      headers,
      body: body as RequestInit['body'],
      redirect: 'manual',
      ...(body === req.raw ? { duplex: 'half' } : {}),
    } as RequestInit), (r) => r.status);
  } catch (err) {
    throw new UnreachableError(`master unavailable: ${((err as Error).cause as Error)?.message ?? (err as Error).message}`, 'the master did not answer; retry shortly');
  }
  return relayAnswer(req, reply, res, PASS_RESPONSE_HEADERS);
}

function firstValue(v: string | string[] | undefined): string | undefined {
  const one = Array.isArray(v) ? v[0] : v;
  return one?.split(',')[0]?.trim() || undefined;
}
