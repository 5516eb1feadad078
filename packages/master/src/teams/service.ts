import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { badRequest, conflict, notFound, unauthorized, type Logger } from '@svc/common';
import {
  apiKeyHash, apiKeyMask, DEFAULT_TEAM_ID, NO_LIMITS,
  type ApiKeyRecord, type CreatedKey, type CreatedTeam, type KeyIdentity, type TeamLimits, type TeamRecord,
} from '@svc/contracts/teams';
import type { Database } from '../db/schema.ts';
import type { ApiKeyRow, TeamRow } from './tables.ts';

const KEY_NAME_MAX = 128;
/** last_used_at is written at most this often per key, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

/** Limits as a call gives them: absent or null sets none. */
type LimitsInput = Partial<TeamLimits> | null | undefined;

/** What a team key is told on an operator's route (teams.ts): the route does not exist for it. */
export const TEAM_KEY_REFUSALS = {
  createTeam: 'no such route for a team key: teams are made with the admin key',
  setLimits: 'no such route for a team key: limits are set with the admin key',
} as const;

/**
 * Teams and their API keys (docs/security.md). `caller` is the team a call is made for
 * (undefined: the operator): a team sees and changes only itself and its own keys, and another
 * team's ids answer 404 as if they did not exist. The routes check the inputs' shapes (the
 * schemas of TEAM_ROUTES); the rules a schema does not say are checked here.
 */
export class TeamService {
  constructor(private readonly db: Kysely<Database>, private readonly logger: Logger) {}

  /** The team `svc up`'s admin key speaks for; everything made before teams is its. */
  async ensureDefault(): Promise<void> {
    const found = await this.db.selectFrom('t_svc_team').select('team_id').where('team_id', '=', DEFAULT_TEAM_ID).executeTakeFirst();
    if (found) return;
    await this.db.insertInto('t_svc_team').values({ team_id: DEFAULT_TEAM_ID, name: 'default', is_default: 1, limits: JSON.stringify(NO_LIMITS), created_at: Date.now() })
      .execute().catch(async (err) => {
        // Another master made it at the same moment.
        if (!await this.db.selectFrom('t_svc_team').select('team_id').where('team_id', '=', DEFAULT_TEAM_ID).executeTakeFirst()) throw err;
      });
  }

  async createTeam(caller: string | undefined, input: { name: string; limits?: LimitsInput }): Promise<CreatedTeam> {
    if (caller !== undefined) throw notFound(TEAM_KEY_REFUSALS.createTeam);
    const { name } = input;
    const limits = input.limits ?? {};
    if (await this.db.selectFrom('t_svc_team').select('team_id').where('name', '=', name).executeTakeFirst()) throw conflict(`a team named ${name} exists`);
    const teamId = randomUUID();
    const row: TeamRow = { team_id: teamId, name, is_default: 0, limits: JSON.stringify({ ...NO_LIMITS, ...limits }), created_at: Date.now() };
    try {
      await this.db.insertInto('t_svc_team').values(row).execute();
    } catch (err) {
      if (await this.db.selectFrom('t_svc_team').select('team_id').where('name', '=', name).executeTakeFirst()) throw conflict(`a team named ${name} exists`);
      throw err;
    }
    const key = await this.createKey(undefined, teamId, 'default');
    return { team: teamRecord(row), key };
  }

  async listTeams(caller: string | undefined): Promise<TeamRecord[]> {
    let q = this.db.selectFrom('t_svc_team').selectAll().orderBy('created_at').orderBy('team_id');
    if (caller !== undefined) q = q.where('team_id', '=', caller);
    return (await q.execute()).map(teamRecord);
  }

  async getTeam(caller: string | undefined, teamId: string): Promise<TeamRecord> {
    return teamRecord(await this.teamRow(caller, teamId));
  }

  async setLimits(caller: string | undefined, teamId: string, given: LimitsInput): Promise<TeamRecord> {
    if (caller !== undefined) throw notFound(TEAM_KEY_REFUSALS.setLimits);
    const row = await this.teamRow(undefined, teamId);
    const limits = { ...parseLimits(row.limits), ...given };
    await this.db.updateTable('t_svc_team').set({ limits: JSON.stringify(limits) }).where('team_id', '=', teamId).execute();
    return teamRecord({ ...row, limits: JSON.stringify(limits) });
  }

  /** A team's limits (the quota checks'). */
  async limits(teamId: string): Promise<TeamLimits> {
    const row = await this.db.selectFrom('t_svc_team').select('limits').where('team_id', '=', teamId).executeTakeFirst();
    return row ? parseLimits(row.limits) : NO_LIMITS;
  }

  /** name: absent or null is "key". */
  async createKey(caller: string | undefined, teamId: string, given: string | null | undefined): Promise<CreatedKey> {
    await this.teamRow(caller, teamId);
    const name = keyName(given);
    const apiKey = `e2b_${randomBytes(20).toString('hex')}`;
    const row: ApiKeyRow = {
      key_id: randomUUID(), team_id: teamId, name, key_hash: apiKeyHash(apiKey), mask: JSON.stringify(apiKeyMask(apiKey)),
      created_at: Date.now(), last_used_at: null, revoked_at: null,
    };
    await this.db.insertInto('t_svc_api_key').values(row).execute();
    return { ...keyRecord(row), apiKey };
  }

  async listKeys(caller: string | undefined, teamId?: string): Promise<ApiKeyRecord[]> {
    const team = caller ?? teamId;
    let q = this.db.selectFrom('t_svc_api_key').selectAll().where('revoked_at', 'is', null).orderBy('created_at').orderBy('key_id');
    if (team !== undefined) q = q.where('team_id', '=', team);
    return (await q.execute()).map(keyRecord);
  }

  async renameKey(caller: string | undefined, keyId: string, given: string | null | undefined): Promise<ApiKeyRecord> {
    const row = await this.keyRow(caller, keyId);
    const name = keyName(given, true);
    await this.db.updateTable('t_svc_api_key').set({ name }).where('key_id', '=', keyId).execute();
    return keyRecord({ ...row, name });
  }

  /** Revoked keys stop opening anything within the gateways' cache time (docs/security.md). */
  async revokeKey(caller: string | undefined, keyId: string): Promise<void> {
    await this.keyRow(caller, keyId);
    await this.db.updateTable('t_svc_api_key').set({ revoked_at: Date.now() }).where('key_id', '=', keyId).where('revoked_at', 'is', null).execute();
  }

  /** Who a key (by its hash: 64 hex digits, as the route's schema says) speaks for; 401 for an unknown or revoked key. */
  async verify(keyHash: string): Promise<KeyIdentity> {
    // One query on the gateway's cache miss: the key and its team's limits.
    const row = await this.db.selectFrom('t_svc_api_key').innerJoin('t_svc_team', 't_svc_team.team_id', 't_svc_api_key.team_id')
      .select(['t_svc_api_key.key_id', 't_svc_api_key.team_id', 't_svc_api_key.last_used_at', 't_svc_api_key.revoked_at', 't_svc_team.limits'])
      .where('t_svc_api_key.key_hash', '=', keyHash).executeTakeFirst();
    if (!row || row.revoked_at !== null) throw unauthorized('invalid API key');
    const now = Date.now();
    if (row.last_used_at === null || now - Number(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
      this.db.updateTable('t_svc_api_key').set({ last_used_at: now }).where('key_id', '=', row.key_id).execute()
        .catch((err) => this.logger.warn({ keyId: row.key_id, err: (err as Error).message }, 'recording when an API key was last used failed'));
    }
    return { keyId: row.key_id, teamId: row.team_id, admin: false, limits: parseLimits(row.limits) };
  }

  private async teamRow(caller: string | undefined, teamId: string): Promise<TeamRow> {
    const row = caller !== undefined && caller !== teamId
      ? undefined
      : await this.db.selectFrom('t_svc_team').selectAll().where('team_id', '=', teamId).executeTakeFirst();
    if (!row) throw notFound(`team ${teamId} not found`);
    return row;
  }

  private async keyRow(caller: string | undefined, keyId: string): Promise<ApiKeyRow> {
    let q = this.db.selectFrom('t_svc_api_key').selectAll().where('key_id', '=', keyId).where('revoked_at', 'is', null);
    if (caller !== undefined) q = q.where('team_id', '=', caller);
    const row = await q.executeTakeFirst();
    if (!row) throw notFound(`API key ${keyId} not found`);
    return row;
  }
}

function keyName(name: string | null | undefined, required = false): string {
  if (name === undefined || name === null) {
    if (required) throw badRequest('name is required');
    return 'key';
  }
  if (!name.trim() || name.length > KEY_NAME_MAX || /\p{Cc}/u.test(name)) throw badRequest(`name must be 1 to ${KEY_NAME_MAX} printable characters`);
  return name;
}

function parseLimits(json: string): TeamLimits {
  return { ...NO_LIMITS, ...(JSON.parse(json) as Partial<TeamLimits>) };
}

function teamRecord(r: TeamRow): TeamRecord {
  return { teamId: r.team_id, name: r.name, isDefault: Number(r.is_default) === 1, limits: parseLimits(r.limits), createdAt: new Date(Number(r.created_at)).toISOString() };
}

function keyRecord(r: ApiKeyRow): ApiKeyRecord {
  return {
    keyId: r.key_id, teamId: r.team_id, name: r.name, mask: JSON.parse(r.mask) as ApiKeyRecord['mask'],
    createdAt: new Date(Number(r.created_at)).toISOString(),
    ...(r.last_used_at !== null ? { lastUsedAt: new Date(Number(r.last_used_at)).toISOString() } : {}),
    ...(r.revoked_at !== null ? { revokedAt: new Date(Number(r.revoked_at)).toISOString() } : {}),
  };
}
