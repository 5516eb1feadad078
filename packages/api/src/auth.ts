import type { FastifyRequest } from 'fastify';
import { clientPrefix, sameSecret, type SvcError, unauthorized } from '@svc/common';
import { isContextFilesUpload } from '@svc/contracts';
import type { KeyIdentity } from '@svc/contracts/teams';
import type { AuthCallback } from './auth-callback.ts';
import type { KeyVerifier } from './key-verifier.ts';
import { MinuteCounter, tooManyRequests } from './rate-limits.ts';
import { setIdentity } from './request-identity.ts';
import { CONSOLE_PATH } from './console-files.ts';

export interface AuthConfig {
  /** Checks presented keys; undefined: no key is asked for (every call is the operator's, or the callback's caller's). */
  verifier?: KeyVerifier;
  /** The operator's auth callback (api.auth_callback_url); undefined: none. */
  callback?: AuthCallback;
  /** Failed key checks from one client address in a minute before its failures get 429. */
  maxFailuresPerMin: number;
  failures: MinuteCounter;
  /** Each team's requests this minute, against its maxRequestsPerMinute. */
  requests: MinuteCounter;
  /** The client's address (client-address.ts: X-Forwarded-For from a trusted proxy); default the peer's. */
  clientAddress?: (req: FastifyRequest) => string;
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

export function isVolumeContentWithToken(req: FastifyRequest, path: string): boolean {
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
 * The API key check (X-API-Key or Authorization: Bearer), then the optional operator callback
 * (auth-callback.ts), which allows the request with any 2xx answer. With no key check, a caller
 * the callback allows acts as a team, never as the operator.
 *
 * Only failing checks count against the client's budget, and only they are answered 429 once it
 * is spent: a key that verifies is served from any address. Keys hold 160 random bits, so the
 * budget is not what stops a guess; it bounds the lookups and the noise one client causes (over
 * it, only keys that verified here lately are looked up), and counted per client (not per load
 * balancer, client-address.ts) it cuts off that client alone.
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
  // checks (docs/volumes.md); there a key counts only from X-API-Key. Its failures count against
  // the client's budget there (volume-token-budget.ts).
  if (isVolumeContentWithToken(req, path)) return;
  const internal = isInternalCaller(req, cfg.internalCaller);
  const refuse = (error: SvcError): never => {
    if (internal) throw error;
    const client = clientPrefix(cfg.clientAddress?.(req) ?? req.ip);
    const blocked = cfg.failures.over(client, cfg.maxFailuresPerMin);
    cfg.failures.add(client);
    if (blocked) throw tooManyRequests(`too many failed API key checks from ${client} (${blocked.count} this minute; the limit is ${cfg.maxFailuresPerMin}); retry in ${blocked.retryAfterSec} s`, blocked.retryAfterSec);
    throw error;
  };
  let identity: KeyIdentity | undefined;
  if (cfg.verifier) {
    const key = presentedKey(req);
    // Over its budget, a client's keys are looked up only when they verified here lately: a
    // stream of random keys then costs the master nothing, and a good key behind the same
    // address (a load balancer without api.trusted_proxies) keeps working.
    // The budget first: a client under it (nearly every request) pays for no key hashing here.
    if (key !== undefined && !internal && cfg.failures.over(clientPrefix(cfg.clientAddress?.(req) ?? req.ip), cfg.maxFailuresPerMin) && !cfg.verifier.knownToVerify(key)) {
      refuse(unauthorized('invalid API key'));
    }
    identity = key === undefined ? undefined : await cfg.verifier.verify(key);
    if (!identity) refuse(unauthorized(key === undefined ? 'missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>' : 'invalid API key'));
  }
  if (cfg.callback) {
    const answer = await cfg.callback.ask(req, path);
    if (!answer.allowed) {
      // A 403 is the callback's rule about this route for a caller it knows: no failed check.
      if (answer.failedCheck) refuse(answer.error);
      throw answer.error;
    }
    // A key that verified speaks for its own team; the callback only allowed the request.
    identity ??= await cfg.callback.identity(answer.team);
  }
  if (!identity) return;
  const limit = identity.limits.maxRequestsPerMinute;
  const over = cfg.requests.over(identity.teamId, limit);
  if (over) throw tooManyRequests(`team quota maxRequestsPerMinute reached: the team may make ${limit} API requests a minute and made ${over.count}; retry in ${over.retryAfterSec} s`, over.retryAfterSec);
  if (limit > 0) cfg.requests.add(identity.teamId);
  setIdentity(req, identity);
}
