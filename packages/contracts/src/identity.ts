/**
 * Workload identity (docs/security.md): the egress proxy asks the master for the token a
 * `${e2b.identity.tokens.NAME}` placeholder stands for, and verifiers (AWS, GCP) fetch the
 * issuer's discovery documents. IDENTITY_ROUTES:
 *   POST /internal/v1/identity/tokens  {sandboxId, name} → MintedWorkloadToken (X-Svc-Admin-Token,
 *        checked before the body: 403 without it, 503 when the master has none)
 *   GET  /.well-known/openid-configuration, /.well-known/jwks.json (public, on the API's address)
 */
import { JsonClient } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from './egress.ts';
import { answers, call, type RouteTable } from './route-table.ts';
import { clusterHeaders } from './cluster-token.ts';

export interface MintedWorkloadToken {
  token: string;
  /** Unix seconds. */
  expiresAt: number;
}

/** The OIDC discovery document (OpenID Connect Discovery 1.0 §3), as much of it as verifiers read. */
export interface OpenIdConfiguration {
  issuer: string;
  jwks_uri: string;
  response_types_supported: string[];
  subject_types_supported: string[];
  id_token_signing_alg_values_supported: string[];
  claims_supported: string[];
}

/** A P-256 public key as published in the JWKS. */
export interface EcPublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

export interface JwkSet {
  keys: EcPublicJwk[];
}

/** Extra fields are let through, as before the schema. */
const MintBody = {
  type: 'object',
  required: ['sandboxId', 'name'],
  properties: { sandboxId: { type: 'string' }, name: { type: 'string', description: 'A token name of the sandbox\'s iam.tokens' } },
} as const;

/** The master's identity routes (route-table.ts). */
export const IDENTITY_ROUTES = {
  openidConfiguration: { method: 'GET', path: '/.well-known/openid-configuration', answer: answers<OpenIdConfiguration>() },
  jwks: { method: 'GET', path: '/.well-known/jwks.json', answer: answers<JwkSet>() },
  mint: { method: 'POST', path: '/internal/v1/identity/tokens', body: MintBody, answer: answers<MintedWorkloadToken>() },
} as const satisfies RouteTable;

export class IdentityMintClient {
  private readonly http: JsonClient;
  constructor(masterUrl: string, adminToken: string, opts: { timeoutMs?: number; clusterToken?: string } = {}) {
    this.http = new JsonClient(masterUrl, { timeoutMs: opts.timeoutMs ?? 5_000, headers: { ...clusterHeaders(opts.clusterToken), [EGRESS_ADMIN_TOKEN_HEADER]: adminToken } });
  }
  mint(sandboxId: string, name: string): Promise<MintedWorkloadToken> {
    return call(this.http, IDENTITY_ROUTES.mint, {}, { body: { sandboxId, name } });
  }
}
