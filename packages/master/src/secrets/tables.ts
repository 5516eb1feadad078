/**
 * The secrets vault's tables. A secret's values are kept only sealed (vault/vault.ts), one row
 * per version; the secret's row names the version readers get.
 */
export interface SecretRow {
  /** `sec_` and 24 lower-case alphanumerics. */
  secret_id: string;
  team_id: string;
  /** Lower-case; unique within a team. */
  name: string;
  /** JSON of the user's string-to-string metadata. */
  metadata: string;
  current_version: number;
  created_at: number;
  updated_at: number;
}

export interface SecretVersionRow {
  secret_id: string;
  /** From 1, one more at each update. */
  version: number;
  /** Sealed with the context `${secret_id}:${version}`, so it opens in this row only. */
  sealed_value: string;
  created_at: number;
}

export interface SecretTables {
  t_svc_secret: SecretRow;
  t_svc_secret_version: SecretVersionRow;
}
