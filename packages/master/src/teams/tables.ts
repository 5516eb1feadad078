/** t_svc_team and t_svc_api_key (docs/security.md). */
export interface TeamRow {
  team_id: string;
  name: string;
  is_default: number;
  /** TeamLimits as JSON. */
  limits: string;
  created_at: number;
}

export interface ApiKeyRow {
  key_id: string;
  team_id: string;
  name: string;
  /** SHA-256 hex of the key; the key itself is never stored. */
  key_hash: string;
  /** apiKeyMask() as JSON. */
  mask: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

export interface TeamTables {
  t_svc_team: TeamRow;
  t_svc_api_key: ApiKeyRow;
}
