import { createHash } from 'node:crypto';
import { sameSecret } from './secrets.ts';

/**
 * E2B's signed file URLs (the SDK's uploadUrl and downloadUrl): "v1_" +
 * base64(sha256("path:operation:username:token[:expiration]")) without padding. One check,
 * used by envd and by the data-plane proxy in front of it.
 */
export interface SignedFileRequest {
  path: string;
  operation: 'read' | 'write';
  username?: string | undefined;
  signature?: string | undefined;
  /** Unix seconds as sent in `signature_expiration`; undefined when the URL never expires. */
  expiration?: string | undefined;
}

export function fileSignature(path: string, operation: string, username: string, token: string, expiration?: number): string {
  const parts = [path, operation, username, token];
  if (expiration !== undefined) parts.push(String(expiration));
  return `v1_${createHash('sha256').update(parts.join(':')).digest('base64').replace(/=+$/, '')}`;
}

/** Undefined when the signature is valid for `token` now; otherwise why it is not. */
export function fileSignatureProblem(req: SignedFileRequest, token: string, nowSec = Math.floor(Date.now() / 1000)): string | undefined {
  if (!req.signature) return 'missing signature query parameter';
  let expiration: number | undefined;
  if (req.expiration !== undefined) {
    expiration = Number(req.expiration);
    if (!Number.isInteger(expiration)) return 'invalid signature expiration';
  }
  if (!sameSecret(req.signature, fileSignature(req.path, req.operation, req.username ?? '', token, expiration))) return 'invalid signature';
  if (expiration !== undefined && expiration < nowSec) return 'signature is already expired';
  return undefined;
}

/** A signed-URL look-up's body as the master's internal route takes it; anything else is a 400. */
/** The signed-URL fields of a /files request's query string. */
export function signedFileRequest(method: string, query: URLSearchParams): SignedFileRequest {
  return {
    path: query.get('path') ?? '',
    operation: method === 'GET' || method === 'HEAD' ? 'read' : 'write',
    username: query.get('username') ?? undefined,
    signature: query.get('signature') ?? undefined,
    expiration: query.get('signature_expiration') ?? undefined,
  };
}
