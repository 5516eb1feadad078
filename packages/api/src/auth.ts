import type { FastifyRequest } from 'fastify';
import { sameSecret, SvcError, unauthorized } from '@svc/common';
import { isContextFilesUpload } from '@svc/contracts';
import type { KeyVerifier } from './key-verifier.ts';
import { MinuteCounter, tooManyRequests } from './rate-limits.ts';
import { setIdentity } from './request-identity.ts';
import { CONSOLE_PATH } from './console-files.ts';

export interface AuthConfig {
  /** Checks presented keys; undefined: no key is asked for (every call is the operator's). */
  verifier?: KeyVerifier;
  callbackUrl: string;
  /** Failed key checks from one address in a minute before it gets 429. */
  maxFailuresPerMin: number;
  failures: MinuteCounter;
  /** Each team's requests this minute, against its maxRequestsPerMinute. */
  requests: MinuteCounter;
  /**
   * This process's secret for its own /mcp tools' calls (INTERNAL_CALLER_HEADER). They come from
   * the API's own address with a key that passed its /mcp request: a failure there is a key
   * revoked since, never a guess, and counted by that address it locked every MCP session of
   * every team out for the rest of the minute.
   */
  internalCaller?: string;
}

/** Marks the API's own /mcp tools' calls; removed before anything else reads the request. */
export const INTERNAL_CALLER_HEADER = 'x-svc-internal-caller';

/**
 * Routes that answer without a key: health checks for load balancers, the API's description,
 * and the workload identity issuer's documents, which AWS and GCP fetch (docs/security.md).
 */
const OPEN_PATHS = new Set(['/health', '/openapi.json', '/docs', '/.well-known/openid-configuration', '/.well-known/jwks.json']);

function isVolumeContentWithToken(req: FastifyRequest, path: string): boolean {
  return path.startsWith('/volumecontent/') && req.headers['x-api-key'] === undefined && req.headers['x-admin-token'] === undefined
    && typeof req.headers.authorization === 'string' && /^bearer\s+\S/i.test(req.headers.authorization);
}

function isInternalCaller(req: FastifyRequest, secret: string | undefined): boolean {
  const presented = req.headers[INTERNAL_CALLER_HEADER];
  delete req.headers[INTERNAL_CALLER_HEADER];
  return secret !== undefined && typeof presented === 'string' && sameSecret(presented, secret);
}

export function presentedKey(req: FastifyRequest): string | undefined {
  const key = req.headers['x-api-key'] ?? req.headers['x-admin-token'];
  if (typeof key === 'string' && key) return key;
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^bearer\s+/i.test(auth)) return auth.replace(/^bearer\s+/i, '').trim();
  return undefined;
}


/**
 * API key check (X-API-Key or Authorization: Bearer), then the optional operator callback,
 * which receives X-Request-Path and X-Request-Method (and the caller's credentials) and
 * allows the request with any 2xx answer.
 */
export async function authenticate(req: FastifyRequest, cfg: AuthConfig): Promise<void> {
  const path = req.url.split('?')[0];
  if (OPEN_PATHS.has(path)) return;
  // The web console's static files (console-files.ts): the page signs in with the user's key.
  if (path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)) return;
  // The SDK uploads a build's files with the signed URL alone, as to E2B's presigned URLs; the
  // master checks the signature (packages/master/src/builds/context-files.ts).
  if (isContextFilesUpload(req.method, path)) return;
  // E2B's Volume sends its content calls with the volume's token as the bearer, which the master
  // checks (docs/volumes.md); there a key counts only from X-API-Key.
  if (isVolumeContentWithToken(req, path)) return;
  const internal = isInternalCaller(req, cfg.internalCaller);
  if (cfg.verifier) {
    const source = req.ip;
    const blocked = internal ? undefined : cfg.failures.over(source, cfg.maxFailuresPerMin);
    if (blocked) throw tooManyRequests(`too many failed API key checks from ${source} (${blocked.count} this minute; the limit is ${cfg.maxFailuresPerMin}); retry in ${blocked.retryAfterSec} s`, blocked.retryAfterSec);
    const key = presentedKey(req);
    const identity = key === undefined ? undefined : await cfg.verifier.verify(key);
    if (!identity) {
      if (!internal) cfg.failures.add(source);
      throw unauthorized(key === undefined ? 'missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>' : 'invalid API key');
    }
    const limit = identity.limits.maxRequestsPerMinute;
    const over = cfg.requests.over(identity.teamId, limit);
    if (over) throw tooManyRequests(`team quota maxRequestsPerMinute reached: the team may make ${limit} API requests a minute and made ${over.count}; retry in ${over.retryAfterSec} s`, over.retryAfterSec);
    if (limit > 0) cfg.requests.add(identity.teamId);
    setIdentity(req, identity);
  }
  if (cfg.callbackUrl) {
    const headers: Record<string, string> = { 'X-Request-Path': path, 'X-Request-Method': req.method };
    for (const h of ['x-api-key', 'authorization'] as const) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    let res: Response;
    try {
      res = await fetch(cfg.callbackUrl, { method: 'POST', headers, signal: AbortSignal.timeout(5_000) });
    } catch {
      throw new SvcError(503, 'the authorization service did not answer', { headers: { 'Retry-After': '2' } });
    }
    await res.body?.cancel();
    if (res.ok) return;
    if (res.status === 401) throw unauthorized('the authorization service refused the credentials');
    if (res.status === 403) throw new SvcError(403, `the authorization service denied ${req.method} ${path}`);
    throw new SvcError(503, `the authorization service answered ${res.status}`, { headers: { 'Retry-After': '2' } });
  }
}
