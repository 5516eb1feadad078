import type { FastifyRequest } from 'fastify';
import { forbidden, SvcError, unauthorized, UnreachableError } from '@svc/common';
import { DEFAULT_TEAM_ID, type KeyIdentity, type TeamsClient } from '@svc/contracts/teams';
import { KEY_CACHE_MS } from './key-verifier.ts';

/** The header of a 2xx answer by which the callback names the caller's team. */
const CALLBACK_TEAM_HEADER = 'x-svc-team';
/** The key id the audit log records for a caller the callback let in (it presented no key of ours). */
export const CALLBACK_KEY_ID = 'auth-callback';
/** The caller's credentials, passed on to the callback as they came. */
const CREDENTIAL_HEADERS = ['x-api-key', 'x-admin-token', 'authorization'] as const;
const TIMEOUT_MS = 5_000;
const CACHE_MAX = 10_000;

/** What the callback said: allowed (naming a team or not), or a refusal and whether it is a failed credential check. */
type CallbackAnswer = { allowed: true; team?: string } | { allowed: false; error: SvcError; failedCheck: boolean };

/**
 * The operator's auth callback (api.auth_callback_url, docs/configuration.md). It is POSTed the
 * request's path, method and credentials, and allows with any 2xx. A caller it allows acts as
 * the team its answer names in X-Svc-Team, else as the default team, never as the operator: the
 * operator's routes need the admin key (docs/security.md, "The operator's auth callback").
 */
export class AuthCallback {
  private readonly teams = new Map<string, { identity?: KeyIdentity; until: number }>();

  constructor(private readonly url: string, private readonly teamsClient: Pick<TeamsClient, 'getTeam'>, private readonly now: () => number = Date.now) {}

  async ask(req: FastifyRequest, path: string): Promise<CallbackAnswer> {
    const headers: Record<string, string> = { 'X-Request-Path': path, 'X-Request-Method': req.method };
    for (const h of CREDENTIAL_HEADERS) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    let res: Response;
    try {
      res = await fetch(this.url, { method: 'POST', headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (err) {
      throw new UnreachableError(`the authorization service did not answer (${(err as Error).message})`, 'the authorization service did not answer');
    }
    // The status is the answer; a body, if any, is not read.
    await res.body?.cancel();
    if (res.ok) {
      const team = res.headers.get(CALLBACK_TEAM_HEADER)?.trim();
      return { allowed: true, ...(team ? { team } : {}) };
    }
    if (res.status === 401) return { allowed: false, error: unauthorized('the authorization service refused the credentials'), failedCheck: true };
    if (res.status === 403) return { allowed: false, error: new SvcError(403, `the authorization service denied ${req.method} ${path}`), failedCheck: false };
    throw new SvcError(503, `the authorization service answered ${res.status}`, { headers: { 'Retry-After': '2' } });
  }

  /**
   * Who a caller the callback allowed acts as: the team it named, or the default team; a team
   * key's rights, never the admin key's. A team the master does not know is a 403 (the callback
   * is the operator's, and misconfigured). Kept KEY_CACHE_MS, as a key's answer is.
   */
  async identity(team: string | undefined): Promise<KeyIdentity> {
    const teamId = team ?? DEFAULT_TEAM_ID;
    const now = this.now();
    const hit = this.teams.get(teamId);
    let identity = hit && hit.until > now ? hit.identity : undefined;
    if (!hit || hit.until <= now) {
      identity = await this.lookUp(teamId);
      if (this.teams.size >= CACHE_MAX) this.teams.clear();
      this.teams.set(teamId, { identity, until: now + KEY_CACHE_MS });
    }
    if (!identity) throw forbidden(`the authorization service named team ${JSON.stringify(teamId)} in ${CALLBACK_TEAM_HEADER}, which does not exist`);
    return identity;
  }

  private async lookUp(teamId: string): Promise<KeyIdentity | undefined> {
    try {
      const t = await this.teamsClient.getTeam(teamId);
      return { keyId: CALLBACK_KEY_ID, teamId: t.teamId, admin: false, limits: t.limits };
    } catch (err) {
      if (err instanceof SvcError && (err.status === 404 || err.status === 400)) return undefined;
      throw new UnreachableError(`the caller's team could not be looked up: the master did not answer (${(err as Error).message})`, 'the caller\'s team could not be looked up: the master did not answer; retry shortly');
    }
  }
}
