/**
 * `Team` and `ApiKey`: teams, their limits and their API keys (docs/security.md). Making teams
 * and setting limits needs the admin key; a team key lists and manages its own team's keys.
 */
import { ApiClient } from './api-client.ts';
import { InvalidArgumentError, NotFoundError } from './errors.ts';
import type { SandboxApiOpts } from './types.ts';
import { checkLimits, TEAM_NAME_PATTERN, type ApiKeyRecord, type CreatedKey, type TeamLimits, type TeamRecord } from '@svc/contracts/teams';
import type { CreatedTeamInfo } from './off-document-routes.ts';

export type { ApiKeyRecord, CreatedKey, CreatedTeamInfo, TeamLimits, TeamRecord };

// Teams and keys are not in the public OpenAPI document: `request`, typed by off-document-routes.ts.

function limitsOf(limits: Partial<TeamLimits> | undefined): Partial<TeamLimits> {
  try {
    return checkLimits(limits);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

export class Team {
  static async create(name: string, opts: SandboxApiOpts & { limits?: Partial<TeamLimits> } = {}): Promise<CreatedTeamInfo> {
    if (!TEAM_NAME_PATTERN.test(name)) throw new InvalidArgumentError(`team name ${JSON.stringify(name)} must match ${TEAM_NAME_PATTERN}`);
    const limits = limitsOf(opts.limits);
    return new ApiClient(opts).request('POST', '/svc/teams', { body: { name, ...(Object.keys(limits).length ? { limits } : {}) }, signal: opts.signal });
  }

  static async list(opts: SandboxApiOpts = {}): Promise<TeamRecord[]> {
    return new ApiClient(opts).request('GET', '/svc/teams', { signal: opts.signal });
  }

  static async get(teamId: string, opts: SandboxApiOpts = {}): Promise<TeamRecord> {
    return new ApiClient(opts).request('GET', '/svc/teams/{id}', { params: { id: teamId }, notFound: NotFoundError, signal: opts.signal });
  }

  /** Changes the limits named; 0 is no limit. */
  static async setLimits(teamId: string, limits: Partial<TeamLimits>, opts: SandboxApiOpts = {}): Promise<TeamRecord> {
    const body = { limits: limitsOf(limits) };
    return new ApiClient(opts).request('PATCH', '/svc/teams/{id}', { params: { id: teamId }, body, notFound: NotFoundError, signal: opts.signal });
  }
}

export class ApiKey {
  static async create(teamId: string, opts: SandboxApiOpts & { name?: string } = {}): Promise<CreatedKey> {
    return new ApiClient(opts).request('POST', '/svc/teams/{id}/keys', { params: { id: teamId }, body: opts.name === undefined ? {} : { name: opts.name }, notFound: NotFoundError, signal: opts.signal });
  }

  /** The keys of a team (the admin key: of every team, or of `teamId`); never their values. */
  static async list(opts: SandboxApiOpts & { teamId?: string } = {}): Promise<ApiKeyRecord[]> {
    const api = new ApiClient(opts);
    return opts.teamId
      ? api.request('GET', '/svc/keys?teamId={teamId}', { params: { teamId: opts.teamId }, signal: opts.signal })
      : api.request('GET', '/svc/keys', { signal: opts.signal });
  }

  /** Revokes the key: every gateway refuses it within a second. false when there is no such key. */
  static async revoke(keyId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    try {
      await new ApiClient(opts).request('DELETE', '/svc/keys/{id}', { params: { id: keyId }, notFound: NotFoundError, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }
}
