/**
 * Teams, API keys and quotas (docs/security.md): the contract between the API gateway, the CLI
 * and the master. The gateway verifies a key, then calls the master on the team's behalf with
 * TEAM_HEADER set; the master scopes every read and write to that team. A call without the
 * header is the operator's (the master's address is private, docs/security.md "Trust").
 * The routes are TEAM_ROUTES below:
 *   POST   /v1/teams                     → 201 CreatedTeam   (body CreateTeamInput; operator only)
 *   GET    /v1/teams                     → TeamRecord[]
 *   GET    /v1/teams/:id                 → TeamRecord | 404
 *   PATCH  /v1/teams/:id                 → TeamRecord        (body { limits: Partial<TeamLimits> }; operator only)
 *   POST   /v1/teams/:id/keys            → 201 CreatedKey    (body { name? })
 *   POST   /v1/teams/:id/sandboxes/kill  → { killedCount, failedCount } (operator only)
 *   GET    /v1/keys                      → ApiKeyRecord[]    (query teamId?)
 *   PATCH  /v1/keys/:id                  → ApiKeyRecord      (body { name })
 *   DELETE /v1/keys/:id                  → 204 | 404         (revokes)
 *   GET    /v1/admin/running-counts      → running sandboxes by team id (operator only)
 *   POST   /internal/v1/keys/verify      → KeyIdentity | 401 (body { keyHash })
 * An operator-only route answers a team's call 404, as a route that does not exist.
 */
import { createHash } from 'node:crypto';
import { JsonClient } from '@svc/common';
import { answers, call, type RouteTable } from './route-table.ts';

/** The header the gateway sets on every call it makes for a team; a client's own is dropped. */
export const TEAM_HEADER = 'x-svc-team';
/** The team `svc up` makes, whose admin key is the configured one; rows from before teams are its. */
export const DEFAULT_TEAM_ID = '00000000-0000-4000-8000-000000000001';
/** The key id the gateway records for the configured admin key (it is not a stored key). */
export const ADMIN_KEY_ID = 'admin';

/** E2B's key format: `e2b_` and 40 hex digits (160 random bits). */
export const API_KEY_PATTERN = /^e2b_[0-9a-f]{40}$/;
export const TEAM_NAME_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

/** What the master stores of a key: its SHA-256 (the key holds 160 random bits, so no slow hash is needed). */
export function apiKeyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** How a key is shown after it was made: its prefix and last four digits (E2B's mask). */
export function apiKeyMask(key: string): { prefix: string; valueLength: number; maskedValuePrefix: string; maskedValueSuffix: string } {
  return { prefix: 'e2b_', valueLength: key.length - 4, maskedValuePrefix: key.slice(4, 6), maskedValueSuffix: key.slice(-4) };
}

/** Per-team limits; 0 is no limit. */
export interface TeamLimits {
  maxSandboxes: number;
  maxMemoryMB: number;
  maxVcpus: number;
  maxConcurrentBuilds: number;
  /** API requests a minute, counted at the gateway. */
  maxRequestsPerMinute: number;
  /**
   * Sandboxes kept, running or paused together: what a team stores on the nodes and in the
   * artifact store. Counted at create and fork; a pause never fails for it.
   */
  maxKeptSandboxes: number;
  /** Snapshots kept (the team's own, named or not); counted when one is taken. */
  maxSnapshots: number;
  /** Persistent volumes kept (those being deleted too); counted when one is created. */
  maxVolumes: number;
}

export const NO_LIMITS: TeamLimits = { maxSandboxes: 0, maxMemoryMB: 0, maxVcpus: 0, maxConcurrentBuilds: 0, maxRequestsPerMinute: 0, maxKeptSandboxes: 0, maxSnapshots: 0, maxVolumes: 0 };

export interface TeamRecord {
  teamId: string;
  name: string;
  /** The team `svc up` made, whose admin key is the configured one. */
  isDefault: boolean;
  limits: TeamLimits;
  createdAt: string;
}

export interface CreateTeamInput {
  name: string;
  limits?: Partial<TeamLimits>;
}

export interface ApiKeyRecord {
  keyId: string;
  teamId: string;
  name: string;
  mask: ReturnType<typeof apiKeyMask>;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
}

/** A new key: the only time its value is shown. */
export interface CreatedKey extends ApiKeyRecord {
  apiKey: string;
}

export interface CreatedTeam {
  team: TeamRecord;
  key: CreatedKey;
}

/** Who a verified key speaks for. */
export interface KeyIdentity {
  keyId: string;
  teamId: string;
  /** The configured admin key: may manage teams and keys. */
  admin: boolean;
  limits: TeamLimits;
}

export function checkLimits(v: unknown): Partial<TeamLimits> {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new TypeError('limits must be an object');
  const out: Partial<TeamLimits> = {};
  for (const [k, n] of Object.entries(v)) {
    if (!(k in NO_LIMITS)) throw new TypeError(`unknown limit ${JSON.stringify(k)}: known are ${Object.keys(NO_LIMITS).join(', ')}`);
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw new TypeError(`limit ${k} must be a whole number, 0 or more (0: no limit)`);
    out[k as keyof TeamLimits] = n;
  }
  return out;
}

/** A limit as a body gives it: a whole number, 0 or more (0: no limit). */
const limit = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } as const;

const limitProperties = {
  maxSandboxes: limit, maxMemoryMB: limit, maxVcpus: limit, maxConcurrentBuilds: limit, maxRequestsPerMinute: limit,
  maxKeptSandboxes: limit, maxSnapshots: limit, maxVolumes: limit,
} as const satisfies Record<keyof TeamLimits, unknown>;

/** Limits in a body: the known names only; null or absent sets none. */
const LimitsBody = {
  type: ['object', 'null'],
  properties: limitProperties,
  additionalProperties: false,
} as const;

const CreateTeamBody = {
  type: 'object',
  required: ['name'],
  properties: { name: { type: 'string', pattern: TEAM_NAME_PATTERN.source }, limits: LimitsBody },
  additionalProperties: false,
} as const;

/** No body, or null, sets nothing. */
const SetLimitsBody = {
  type: ['object', 'null'],
  properties: { limits: LimitsBody },
  additionalProperties: false,
} as const;

/**
 * A key's name (create: absent is "key"; rename: required). Its text (1 to 128 printable
 * characters) is the master's check.
 */
const KeyNameBody = {
  type: ['object', 'null'],
  properties: { name: { type: ['string', 'null'] } },
  additionalProperties: false,
} as const;

const VerifyKeyBody = {
  type: 'object',
  required: ['keyHash'],
  properties: { keyHash: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'SHA-256 of the key, hex (apiKeyHash)' } },
} as const;

/** teamId given once: the operator's filter (a team's call lists its own keys whatever it names). */
const ListKeysQuery = {
  type: 'object',
  properties: { teamId: { type: 'string' } },
} as const;

/** What killing a team's sandboxes did. */
interface KilledSandboxes {
  killedCount: number;
  failedCount: number;
}

/** The master's team and key routes (route-table.ts): the master serves them, TeamsClient calls them. */
export const TEAM_ROUTES = {
  createTeam: { method: 'POST', path: '/v1/teams', body: CreateTeamBody, answer: answers<CreatedTeam>() },
  listTeams: { method: 'GET', path: '/v1/teams', answer: answers<TeamRecord[]>() },
  getTeam: { method: 'GET', path: '/v1/teams/:id', answer: answers<TeamRecord>() },
  setLimits: { method: 'PATCH', path: '/v1/teams/:id', body: SetLimitsBody, answer: answers<TeamRecord>() },
  createKey: { method: 'POST', path: '/v1/teams/:id/keys', body: KeyNameBody, answer: answers<CreatedKey>() },
  killTeamSandboxes: { method: 'POST', path: '/v1/teams/:id/sandboxes/kill', answer: answers<KilledSandboxes>() },
  listKeys: { method: 'GET', path: '/v1/keys', query: ListKeysQuery, answer: answers<ApiKeyRecord[]>() },
  renameKey: { method: 'PATCH', path: '/v1/keys/:id', body: KeyNameBody, answer: answers<ApiKeyRecord>() },
  revokeKey: { method: 'DELETE', path: '/v1/keys/:id', answer: answers<void>() },
  runningCounts: { method: 'GET', path: '/v1/admin/running-counts', answer: answers<Record<string, number>>() },
  verify: { method: 'POST', path: '/internal/v1/keys/verify', body: VerifyKeyBody, answer: answers<KeyIdentity>() },
} as const satisfies RouteTable;

const R = TEAM_ROUTES;

export class TeamsClient {
  readonly http: JsonClient;
  /** headers: the gateway's team header when it calls for a team key (the master scopes by it). */
  constructor(baseUrl: string, opts: { timeoutMs?: number; headers?: Record<string, string> } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 10_000, ...(opts.headers ? { headers: opts.headers } : {}) });
  }
  createTeam(input: CreateTeamInput) { return call(this.http, R.createTeam, {}, { body: input }); }
  listTeams() { return call(this.http, R.listTeams, {}); }
  getTeam(id: string) { return call(this.http, R.getTeam, { id }); }
  setLimits(id: string, limits: Partial<TeamLimits>) { return call(this.http, R.setLimits, { id }, { body: { limits } }); }
  createKey(teamId: string, name?: string) { return call(this.http, R.createKey, { id: teamId }, { body: { name } }); }
  listKeys(teamId?: string) { return call(this.http, R.listKeys, {}, { query: { teamId } }); }
  /** No name: the master's 400 (a key's name is required here). */
  renameKey(id: string, name: string | undefined) { return call(this.http, R.renameKey, { id }, { body: { name } }); }
  revokeKey(id: string) { return call(this.http, R.revokeKey, { id }); }
  runningCounts() { return call(this.http, R.runningCounts, {}); }
  killTeamSandboxes(teamId: string) { return call(this.http, R.killTeamSandboxes, { id: teamId }, { body: {} }); }
  verify(keyHash: string) { return call(this.http, R.verify, {}, { body: { keyHash } }); }
}
