/**
 * Workload identity (docs/security.md): the egress proxy asks the master for the token a
 * `${e2b.identity.tokens.NAME}` placeholder stands for.
 *   POST /internal/v1/identity/tokens  {sandboxId, name} → MintedWorkloadToken (X-Svc-Admin-Token)
 *   GET  /.well-known/openid-configuration, /.well-known/jwks.json (public, on the API's address)
 */
import { JsonClient } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from './egress.ts';

export const IDENTITY_MINT_PATH = '/internal/v1/identity/tokens';

export interface MintedWorkloadToken {
  token: string;
  /** Unix seconds. */
  expiresAt: number;
}

export class IdentityMintClient {
  private readonly http: JsonClient;
  constructor(masterUrl: string, adminToken: string, opts: { timeoutMs?: number } = {}) {
    this.http = new JsonClient(masterUrl, { timeoutMs: opts.timeoutMs ?? 5_000, headers: { [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } });
  }
  mint(sandboxId: string, name: string): Promise<MintedWorkloadToken> {
    return this.http.post<MintedWorkloadToken>(IDENTITY_MINT_PATH, { sandboxId, name });
  }
}
