import { sameSecret } from '@svc/common/secrets';
import type { IncomingHttpHeaders } from 'node:http';
import type { EnvdConfig } from './config.ts';
import { ConnectError } from './connect/code.ts';
import { UserDatabase, type User } from './system/users.ts';

/** Set by E2B's envd for every process; some tools use it to detect a sandbox. */
const internalEnv = { E2B_SANDBOX: 'true' };

/**
 * What `/init` can change at run time: env vars, the access token, default user and workdir.
 * Everything that resolves "who is calling" and "with which environment" goes through here.
 */
export class EnvdState {
  readonly users: UserDatabase;
  private readonly baseEnv: Record<string, string>;
  private initEnv: Record<string, string> = {};
  private token: Buffer | undefined;
  private explicitDefaultUser: string | undefined;
  private readonly startupDefaultUser: string | undefined;
  defaultWorkdir: string | undefined;
  private lastInitTimestamp = -Infinity;

  constructor(config: EnvdConfig, users = new UserDatabase()) {
    this.users = users;
    this.baseEnv = config.sandboxEnv;
    this.explicitDefaultUser = config.defaultUser;
    this.startupDefaultUser = config.defaultUser;
    // The access token arrives only through POST /init, for a sandbox started cold or warm alike.
  }

  /** Env vars given to every process: start-up env, then /init's, then envd's internal ones. */
  envVars(): Record<string, string> {
    return { ...this.baseEnv, ...this.initEnv, ...internalEnv };
  }

  /** Replaces the variables set by a previous /init (the start-up ones stay). */
  replaceInitEnv(vars: Record<string, string>): void {
    this.initEnv = { ...vars };
  }

  get hasAccessToken(): boolean {
    return this.token !== undefined;
  }

  setAccessToken(token: string | undefined): void {
    this.token = token ? Buffer.from(token) : undefined;
  }

  accessTokenMatches(candidate: string | undefined): boolean {
    if (!this.token || candidate === undefined) return false;
    return sameSecret(candidate, this.token);
  }

  /** The token itself, for request signatures. */
  accessTokenText(): string | undefined {
    return this.token?.toString();
  }

  setDefaultUser(name: string): void {
    this.explicitDefaultUser = name;
  }

  defaultUsername(): string {
    if (this.explicitDefaultUser) return this.explicitDefaultUser;
    return this.users.byName('user') ? 'user' : 'root';
  }

  /**
   * Whether an /init of this time is newer than the last applied one that set a token (one
   * without a time always is). Only an /init that sets a token (`advance`) moves that mark: while
   * envd has no token anyone may POST /init, and such an /init must never make envd drop the node
   * agent's /init that follows it.
   */
  acceptInitTimestamp(timestampMs: number | undefined, advance: boolean): boolean {
    if (timestampMs === undefined) return true;
    if (timestampMs <= this.lastInitTimestamp) return false;
    if (advance) this.lastInitTimestamp = timestampMs;
    return true;
  }

  /**
   * Forgets the mark acceptInitTimestamp holds /inits to: when the token's holder clears the
   * token, the /init that gives the sandbox its next one (another node's, after a microvm
   * restore or fork) is held to nothing that came before.
   */
  forgetInitTimestamps(): void {
    this.lastInitTimestamp = -Infinity;
  }

  /**
   * Forgets what earlier /inits set (env vars, default user and workdir): the /init that gives a
   * tokenless envd its token defines the sandbox whole, so nothing a caller set before it, while
   * anyone could, outlives it.
   */
  resetInitDefaults(): void {
    this.initEnv = {};
    this.explicitDefaultUser = this.startupDefaultUser;
    this.defaultWorkdir = undefined;
  }

  /** Looks a user up by name (or the default user); unknown users are `unauthenticated`. */
  user(name?: string): User {
    const wanted = name ?? this.defaultUsername();
    const user = this.users.byName(wanted);
    if (!user) {
      throw new ConnectError('unauthenticated', name === undefined ? `invalid default user: '${wanted}'` : `invalid username: '${wanted}'`);
    }
    return user;
  }

  /** The user named by `Authorization: Basic base64("<user>:")`, or the default user. */
  userFromHeaders(headers: IncomingHttpHeaders): User {
    return this.user(basicAuthUsername(headers.authorization));
  }
}

export function basicAuthUsername(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Basic\s+(\S+)\s*$/i.exec(authorization);
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const name = colon === -1 ? decoded : decoded.slice(0, colon);
  return name === '' ? undefined : name;
}
