/**
 * t_svc_identity_key: the keys that sign workload identity tokens, shared by every master. The
 * private key is sealed by the vault, its kid the additional data.
 */
interface IdentityKeyRow {
  /** RFC 7638 thumbprint of the public key, as published in the JWKS. */
  kid: string;
  /** The PKCS#8 PEM private key, sealed (vault.ts). */
  private_key_sealed: string;
  created_at: number;
  /** From this time on the key signs, until a newer key's active_from. */
  active_from: number;
}

export interface IdentityTables {
  t_svc_identity_key: IdentityKeyRow;
}
