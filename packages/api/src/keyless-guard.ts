import type { FastifyRequest } from 'fastify';
import { foreignRequest, localNames, SvcError } from '@svc/common';

/**
 * An API without keys (api.api_key and api.auth_callback_url empty, allowed on loopback only)
 * serves every request as the operator: it answers only requests made to this machine's own
 * names and from no web page of another host (common's foreignRequest says why). Until
 * 2026-12-01 only /mcp checked this, and a page could kill the default team's sandboxes with a
 * simple cross-site POST or, rebinding its name to 127.0.0.1, create teams and read their keys.
 * /mcp answers its refusals itself, as JSON-RPC errors.
 */
export function refuseForeignRequest(req: FastifyRequest, listenHost: string): void {
  if (req.url === '/mcp' || req.url.startsWith('/mcp?')) return;
  const foreign = foreignRequest(req.headers.host, req.headers.origin, listenHost);
  if (!foreign) return;
  throw new SvcError(403, foreign.header === 'Host'
    ? `invalid Host header ${JSON.stringify(foreign.value)}: an API without keys answers only requests to ${localNames(listenHost)}`
    : `invalid Origin header ${JSON.stringify(foreign.value)}: an API without keys answers no web page of another host`);
}
