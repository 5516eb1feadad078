import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ConnectError } from '../connect/code.ts';
import type { EnvdState } from '../state.ts';

export interface FileAccessRequest {
  path: string;
  username: string | undefined;
  operation: 'read' | 'write';
  signature: string | undefined;
  signatureExpiration: string | undefined;
}

/**
 * /files accepts either the access token or a URL signature (what the SDK's uploadUrl and
 * downloadUrl produce): "v1_" + base64(sha256("path:operation:username:token[:expiration]")).
 */
export function checkFileAccess(state: EnvdState, req: IncomingMessage, access: FileAccessRequest): void {
  if (!state.hasAccessToken) return;
  const header = req.headers['x-access-token'];
  if (header !== undefined) {
    if (!state.accessTokenMatches(String(header))) throw new ConnectError('unauthenticated', 'access token present in header but does not match');
    return;
  }
  if (!access.signature) throw new ConnectError('unauthenticated', 'missing signature query parameter');
  let expiration: number | undefined;
  if (access.signatureExpiration !== undefined) {
    expiration = Number(access.signatureExpiration);
    if (!Number.isInteger(expiration)) throw new ConnectError('unauthenticated', 'invalid signature expiration');
  }
  const parts = [access.path, access.operation, access.username ?? '', state.accessTokenText()!];
  if (expiration !== undefined) parts.push(String(expiration));
  const expected = Buffer.from(`v1_${createHash('sha256').update(parts.join(':')).digest('base64').replace(/=+$/, '')}`);
  const given = Buffer.from(access.signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new ConnectError('unauthenticated', 'invalid signature');
  if (expiration !== undefined && expiration < Math.floor(Date.now() / 1000)) throw new ConnectError('unauthenticated', 'signature is already expired');
}
