import { sameSecret, SvcError } from '@svc/common';
import { fileSignatureProblem, signedFileRequest } from '@svc/common/envd-signature';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import type { ScannedRequest } from './headers.ts';

/** What a client presented, picked out of its request on the hot path. */
export interface PresentedAccess {
  trafficTokens: string[] | undefined;
  accessToken: string | undefined;
  method: string;
  url: string;
  /** An upgrade (WebSocket): the proxy pipes bytes both ways after it and checks nothing more. */
  upgrade: boolean;
}

export function presentedAccess(scan: ScannedRequest, req: { method: string; url: string }, upgrade = false): PresentedAccess {
  return { trafficTokens: scan.trafficTokens, accessToken: scan.accessToken, method: req.method, url: req.url, upgrade };
}

const TRAFFIC_TOKEN_REFUSED = 'missing or wrong traffic access token (send it in the ext-traffic-access-token header)';
const SIGNED_URL_NO_UPGRADE = 'a signed file URL does not authorise an upgrade: send the envd access token in the X-Access-Token header';
const ENVD_TOKEN_REFUSED = 'missing or wrong envd access token (send it in the X-Access-Token header, or use a signed file URL)';

/**
 * The one access check of the data plane, run before a request may wake or reach a sandbox:
 * - envd's port (0 or the route's envdPort) of a secured sandbox needs its envd access token
 *   (X-Access-Token) or, on /files, a valid URL signature; only /health and CORS preflights are
 *   open (a browser never sends the token on its preflight; envd answers it without reaching a
 *   handler: the web console's terminal, docs/console.md). 401, as envd. Not open when the
 *   request would wake the sandbox (`waking`: a paused sandbox with autoResume), nor for an
 *   upgrade, after which the proxy checks no further request on the connection: until
 *   2026-11-30 a `GET /health` without the token resumed anyone's paused sandbox, and its answer
 *   kept it running. What passes as open is not activity either (passedOpen).
 * - the sandbox's other ports need the traffic token when it has one (allow_public_traffic=false),
 *   as in E2B the official SDK never sends that token to envd. 403.
 * Undefined: allowed.
 */
export function accessRefusal(route: SandboxRoute, port: number, c: PresentedAccess, waking = false): SvcError | undefined {
  if (port === 0 || port === route.envdPort) {
    if (!route.envdAccessToken) return undefined;
    if (c.accessToken !== undefined) return sameSecret(route.envdAccessToken, c.accessToken) ? undefined : new SvcError(401, ENVD_TOKEN_REFUSED);
    if (isOpenEnvdRequest(c.method, c.url) && !waking && !c.upgrade) return undefined;
    const q = c.url.indexOf('?');
    if (q >= 0 && c.url.slice(0, q) === '/files') {
      // A signed URL is handed out to download or upload one file; after an upgrade the proxy
      // would check nothing more on the connection.
      if (c.upgrade) return new SvcError(403, SIGNED_URL_NO_UPGRADE);
      const problem = fileSignatureProblem(signedFileRequest(c.method, new URLSearchParams(c.url.slice(q + 1))), route.envdAccessToken);
      return problem === undefined ? undefined : new SvcError(401, problem);
    }
    return new SvcError(401, ENVD_TOKEN_REFUSED);
  }
  if (!route.trafficAccessToken) return undefined;
  if (c.trafficTokens !== undefined) for (const t of c.trafficTokens) if (sameSecret(route.trafficAccessToken, t)) return undefined;
  return new SvcError(403, TRAFFIC_TOKEN_REFUSED);
}


/**
 * Whether accessRefusal let the request through only because envd answers it without a token
 * (/health, a CORS preflight on a secured sandbox's envd port, no X-Access-Token sent). Such an
 * exchange is no proof of the owner's use and must not count as activity (http-exchange.ts):
 * counted, anyone who knew a secured sandbox's id kept it running forever by polling /health
 * (docs/data-plane.md, "Activity").
 */
export function passedOpen(route: SandboxRoute, port: number, accessToken: string | undefined, method: string, url: string): boolean {
  return (port === 0 || port === route.envdPort) && !!route.envdAccessToken && accessToken === undefined && isOpenEnvdRequest(method, url);
}

/** envd's `GET /health` (any method, any query) and CORS preflights: what it answers without its token. */
function isOpenEnvdRequest(method: string, url: string): boolean {
  if (method === 'OPTIONS') return true;
  return url === '/health' || url.startsWith('/health?');
}
