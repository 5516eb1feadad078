import type { FastifyRequest } from 'fastify';
import { sameSecret, SvcError, unauthorized } from '@svc/common';
import { isContextFilesUpload } from '@svc/contracts';

export interface AuthConfig {
  /** Keys that open the API; none: no key is asked for. */
  apiKeys: string[];
  callbackUrl: string;
}

/** Routes that answer without a key (health checks for load balancers, the API's description). */
const OPEN_PATHS = new Set(['/health', '/openapi.json', '/docs']);

export function presentedKey(req: FastifyRequest): string | undefined {
  const key = req.headers['x-api-key'];
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
  // The SDK uploads a build's files with the signed URL alone, as to E2B's presigned URLs; the
  // master checks the signature (packages/master/src/builds/context-files.ts).
  if (isContextFilesUpload(req.method, path)) return;
  if (cfg.apiKeys.length) {
    const key = presentedKey(req);
    if (!key) throw unauthorized('missing API key: send it in the X-API-Key header or as Authorization: Bearer <key>');
    // Every key is compared, so the time taken does not tell which one came close.
    if (!cfg.apiKeys.map((k) => sameSecret(key, k)).includes(true)) throw unauthorized('invalid API key');
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
