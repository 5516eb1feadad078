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

/** How far ahead of envd's own clock an /init's `timestamp` may be (clocks that agree, give or take). */
const MAX_INIT_AHEAD_MS = 60_000;

/**
 * POST /init personalises a sandbox started ahead of time: env vars, access token, default
 * user and workdir. Allowed when no token is set yet, or when the caller proves it knows the
 * current one (X-Access-Token, or the same token in the body). As in E2B's envd, the token in
 * the body replaces the current one, and leaving it out clears it; an /init older than the
 * last applied one that set a token (by `timestamp`) changes nothing: 409 when it sets a token
 * (its caller must not take the sandbox for secured), 204 otherwise, as in E2B.
 *
 * While envd has no token anyone in the sandbox may POST /init, so such an /init may not outdate
 * the node agent's: a `timestamp` more than MAX_INIT_AHEAD_MS ahead of envd's clock is a 400, an
 * /init without a token never moves the mark later ones are held to, and the /init that gives a
 * tokenless envd its token replaces the env vars, default user and workdir set before it.
 *
 * An /init that clears the token (one authorized by it, with none in the body) also drops the
 * mark: the node agent clears the token before a microvm snapshot is restored, and the /init
 * that follows comes from the node that restores it, whose clock may be behind the first one's.
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

  const timestamp = initTimestamp(init.timestamp);
  const setsToken = Boolean(init.accessToken);
  if (!state.acceptInitTimestamp(timestamp, setsToken)) {
    if (setsToken) throw new ConnectError('aborted', `/init of ${init.timestamp} is older than the last /init that set a token; nothing was changed`);
  } else {
    if (setsToken && !state.hasAccessToken) state.resetInitDefaults();
    // The token's holder clears it (the node agent, before a microvm snapshot is restored or
    // forked): the sandbox's next /init may come from another node, whose clock may be behind.
    if (!setsToken && state.hasAccessToken) state.forgetInitTimestamps();
    if (init.envVars) state.replaceInitEnv(init.envVars);
    state.setAccessToken(init.accessToken || undefined);
    if (init.defaultUser) state.setDefaultUser(init.defaultUser);
    if (init.defaultWorkdir) state.defaultWorkdir = init.defaultWorkdir;
  }
  res.writeHead(204, { 'cache-control': 'no-store' });
  res.end();
}

/** The /init's time in ms, refused when unreadable or further ahead of envd's clock than allowed. */
function initTimestamp(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new ConnectError('invalid_argument', `invalid timestamp "${text}"`);
  const now = Date.now();
  if (ms - now > MAX_INIT_AHEAD_MS) {
    throw new ConnectError('invalid_argument', `timestamp ${text} is ${Math.round((ms - now) / 1000)} s ahead of the sandbox's clock (${new Date(now).toISOString()}); at most ${MAX_INIT_AHEAD_MS / 1000} s is allowed`);
  }
  return ms;
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
