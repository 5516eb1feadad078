import type { IncomingMessage } from 'node:http';
import { fileSignatureProblem, signedFileRequest } from '@svc/common/envd-signature';
import { ConnectError } from '../connect/code.ts';
import type { EnvdState } from '../state.ts';

/**
 * /files accepts either the access token or a URL signature (what the SDK's uploadUrl and
 * downloadUrl produce).
 */
export function checkFileAccess(state: EnvdState, req: IncomingMessage, query: URLSearchParams): void {
  if (!state.hasAccessToken) return;
  const header = req.headers['x-access-token'];
  if (header !== undefined) {
    if (!state.accessTokenMatches(String(header))) throw new ConnectError('unauthenticated', 'access token present in header but does not match');
    return;
  }
  const problem = fileSignatureProblem(signedFileRequest(req.method ?? 'GET', query), state.accessTokenText()!);
  if (problem) throw new ConnectError('unauthenticated', problem);
}
