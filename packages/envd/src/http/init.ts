import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectError } from '../connect/code.ts';
import { ENVD_VERSION } from '@svc/contracts/envd-version';
import type { EnvdState } from '../state.ts';
import { readJsonObject } from './json-body.ts';

const MAX_INIT_BYTES = 1024 * 1024;

interface InitRequest {
  envVars?: Record<string, string>;
  accessToken?: string;
  defaultUser?: string;
  defaultWorkdir?: string;
  timestamp?: string;
}

/**
 * POST /init personalises a sandbox started ahead of time: env vars, access token, default
 * user and workdir. Allowed when no token is set yet, or when the caller proves it knows the
 * current one (X-Access-Token, or the same token in the body). As in E2B's envd, the token in
 * the body replaces the current one, and leaving it out clears it; an /init older than the
 * last applied one (by `timestamp`) is acknowledged but ignored.
 */
export async function handleInit(state: EnvdState, req: IncomingMessage, res: ServerResponse): Promise<void> {
  res.setHeader('x-envd-version', ENVD_VERSION);
  const init = (await readJsonObject(req, MAX_INIT_BYTES, '/init')) as InitRequest;
  validate(init);

  const header = req.headers['x-access-token'];
  const authorized =
    !state.hasAccessToken ||
    (header !== undefined && state.accessTokenMatches(String(header))) ||
    (init.accessToken !== undefined && state.accessTokenMatches(init.accessToken));
  if (!authorized) {
    throw new ConnectError('unauthenticated', init.accessToken ? 'access token validation failed' : 'access token reset not authorized');
  }

  const timestamp = init.timestamp === undefined ? undefined : Date.parse(init.timestamp);
  if (timestamp !== undefined && Number.isNaN(timestamp)) throw new ConnectError('invalid_argument', `invalid timestamp "${init.timestamp}"`);
  if (state.acceptInitTimestamp(timestamp)) {
    if (init.envVars) state.replaceInitEnv(init.envVars);
    state.setAccessToken(init.accessToken || undefined);
    if (init.defaultUser) state.setDefaultUser(init.defaultUser);
    if (init.defaultWorkdir) state.defaultWorkdir = init.defaultWorkdir;
  }
  res.writeHead(204, { 'cache-control': 'no-store' });
  res.end();
}

function validate(init: InitRequest): void {
  const isString = (v: unknown) => v === undefined || typeof v === 'string';
  if (!isString(init.accessToken) || !isString(init.defaultUser) || !isString(init.defaultWorkdir) || !isString(init.timestamp)) {
    throw new ConnectError('invalid_argument', 'invalid /init body: accessToken, defaultUser, defaultWorkdir and timestamp must be strings');
  }
  if (init.envVars !== undefined) {
    const ok = typeof init.envVars === 'object' && init.envVars !== null && !Array.isArray(init.envVars) && Object.values(init.envVars).every((v) => typeof v === 'string');
    if (!ok) throw new ConnectError('invalid_argument', 'invalid /init body: envVars must map names to strings');
  }
}
