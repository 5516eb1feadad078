/**
 * Teams, API keys and quotas (docs/security.md): the contract between the API gateway, the CLI
 * and the master. The gateway verifies a key, then calls the master on the team's behalf with
 * TEAM_HEADER set; the master scopes every read and write to that team. A call without the
 * header is the operator's (the master's address is private, docs/security.md "Trust").
 *   POST   /v1/teams                 → 201 CreatedTeam   (body CreateTeamInput)
 *   GET    /v1/teams                 → TeamRecord[]
 *   GET    /v1/teams/:id             → TeamRecord | 404
 *   PATCH  /v1/teams/:id             → TeamRecord        (body { limits: Partial<TeamLimits> })
 *   POST   /v1/teams/:id/keys        → 201 CreatedKey    (body { name? })
 *   GET    /v1/keys                  → ApiKeyRecord[]    (query teamId?)
 *   DELETE /v1/keys/:id              → 204 | 404         (revokes)
 *   POST   /internal/v1/keys/verify  → KeyIdentity | 401 (body { keyHash })
 */
import { createHash } from 'node:crypto';
import { JsonClient } from '@svc/common';

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
}

export const NO_LIMITS: TeamLimits = { maxSandboxes: 0, maxMemoryMB: 0, maxVcpus: 0, maxConcurrentBuilds: 0, maxRequestsPerMinute: 0 };

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

function seg(id: string): string {
  return encodeURIComponent(id);
}

export class TeamsClient {
  readonly http: JsonClient;
  /** headers: the gateway's team header when it calls for a team key (the master scopes by it). */
  constructor(baseUrl: string, opts: { timeoutMs?: number; headers?: Record<string, string> } = {}) {
    this.http = new JsonClient(baseUrl, { timeoutMs: opts.timeoutMs ?? 10_000, ...(opts.headers ? { headers: opts.headers } : {}) });
  }
  createTeam(input: CreateTeamInput) { return this.http.post<CreatedTeam>('/v1/teams', input); }
  listTeams() { return this.http.get<TeamRecord[]>('/v1/teams'); }
  getTeam(id: string) { return this.http.get<TeamRecord>(`/v1/teams/${seg(id)}`); }
  setLimits(id: string, limits: Partial<TeamLimits>) { return this.http.request<TeamRecord>('PATCH', `/v1/teams/${seg(id)}`, { body: { limits } }); }
  createKey(teamId: string, name?: string) { return this.http.post<CreatedKey>(`/v1/teams/${seg(teamId)}/keys`, { name }); }
  listKeys(teamId?: string) { return this.http.get<ApiKeyRecord[]>('/v1/keys', { query: { teamId } }); }
  renameKey(id: string, name: unknown) { return this.http.request<ApiKeyRecord>('PATCH', `/v1/keys/${seg(id)}`, { body: { name } }); }
  revokeKey(id: string) { return this.http.delete<void>(`/v1/keys/${seg(id)}`); }
  runningCounts() { return this.http.get<Record<string, number>>('/v1/admin/running-counts'); }
  killTeamSandboxes(teamId: string) { return this.http.post<{ killedCount: number; failedCount: number }>(`/v1/teams/${seg(teamId)}/sandboxes/kill`, {}); }
  verify(keyHash: string) { return this.http.post<KeyIdentity>('/internal/v1/keys/verify', { keyHash }); }
}
