import { createPrivateKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import type { EcPublicJwk, JwkSet, OpenIdConfiguration } from '@svc/contracts/identity';
import { publicJwk, sign, type JwtHeader } from './jwt.ts';
import type { SigningKeyStore } from './key-store.ts';

/**
 * The platform's OIDC issuer for workload identity: it mints short-lived ES256 tokens naming a
 * sandbox (a SPIFFE ID as `sub`) and publishes the keys that verify them, so AWS
 * AssumeRoleWithWebIdentity or a GCP workload identity pool can trust the platform.
 *
 * Key lifecycle, shared by every master using one store (times from the store, not local state):
 * - the active key is the newest (by activeFrom, then kid) whose activeFrom <= now; it alone signs;
 * - the next key is stored `prePublishMs` before it becomes active, so verifiers that cache the
 *   JWKS have it before any token signed with it exists;
 * - a key's last signature is at its successor's activeFrom at the latest, so once that is
 *   `maxTtlSec` + RETIRED_KEY_GRACE_MS past, no valid token needs it and it is removed.
 * Every master must run rotateIfDue() periodically (every minute or so): it reloads the store,
 * which is how a master learns of the keys another one added.
 */

export interface WorkloadIdentityIssuerOptions {
  store: SigningKeyStore;
  /** The `iss` claim, and the base of the discovery URLs: https://host[/path], no trailing slash. */
  issuerUrl: string;
  /** The SPIFFE trust domain in `sub`. */
  trustDomain: string;
  /** Epoch milliseconds; default Date.now. */
  now?: () => number;
  rotateEveryMs?: number;
  prePublishMs?: number;
  maxTtlSec?: number;
}

export interface MintInput {
  teamId: string;
  sandboxId: string;
  /** The `aud` claim, exactly as given (e.g. sts.amazonaws.com). */
  audience: string;
  ttlSec?: number;
}

export interface MintedToken {
  token: string;
  /** Unix seconds, the token's `exp`. */
  expiresAt: number;
}

const HOUR_MS = 3_600_000;
const DEFAULT_ROTATE_EVERY_MS = 24 * HOUR_MS;
const DEFAULT_PRE_PUBLISH_MS = HOUR_MS;
const DEFAULT_MAX_TTL_SEC = 3600;
/** Covers clocks that differ between masters and a master that has not reloaded the store yet. */
export const RETIRED_KEY_GRACE_MS = 5 * 60_000;

/** SPIFFE ID path segments and trust domains (SPIFFE-ID spec §2.1, §2.2). */
const SPIFFE_SEGMENT = /^[A-Za-z0-9._-]+$/;
const SPIFFE_TRUST_DOMAIN = /^[a-z0-9._-]+$/;

interface SigningKey {
  kid: string;
  createdAt: number;
  activeFrom: number;
  privateKey: KeyObject;
  header: JwtHeader;
  jwk: EcPublicJwk;
}

export class WorkloadIdentityIssuer {
  private readonly store: SigningKeyStore;
  private readonly issuerUrl: string;
  private readonly trustDomain: string;
  private readonly now: () => number;
  private readonly rotateEveryMs: number;
  private readonly prePublishMs: number;
  private readonly maxTtlSec: number;
  /** Ordered by (activeFrom, kid): the order every master agrees on. */
  private keys: SigningKey[] = [];
  private rotation: Promise<void> | null = null;

  constructor(opts: WorkloadIdentityIssuerOptions) {
    this.store = opts.store;
    this.issuerUrl = checkIssuerUrl(opts.issuerUrl);
    if (!SPIFFE_TRUST_DOMAIN.test(opts.trustDomain)) throw new Error(`trust domain ${JSON.stringify(opts.trustDomain)} must be lowercase letters, digits, dots, dashes and underscores`);
    this.trustDomain = opts.trustDomain;
    this.now = opts.now ?? Date.now;
    this.rotateEveryMs = opts.rotateEveryMs ?? DEFAULT_ROTATE_EVERY_MS;
    this.prePublishMs = opts.prePublishMs ?? DEFAULT_PRE_PUBLISH_MS;
    this.maxTtlSec = opts.maxTtlSec ?? DEFAULT_MAX_TTL_SEC;
    if (!(this.rotateEveryMs > 0)) throw new Error('rotateEveryMs must be positive');
    if (!(this.prePublishMs > 0 && this.prePublishMs < this.rotateEveryMs)) throw new Error('prePublishMs must be positive and shorter than rotateEveryMs');
    if (!Number.isInteger(this.maxTtlSec) || this.maxTtlSec <= 0) throw new Error('maxTtlSec must be a positive whole number of seconds');
  }

  /** Loads the keys; makes one, active at once, when none is. */
  async start(): Promise<void> {
    await this.rotateIfDue();
  }

  /**
   * Reloads the store, then adds the next key when the active one's rotation is within
   * prePublishMs, and removes keys no unexpired token can need. Calls that overlap share one run.
   */
  rotateIfDue(): Promise<void> {
    this.rotation ??= this.rotate().finally(() => { this.rotation = null; });
    return this.rotation;
  }

  mint(input: MintInput): MintedToken {
    const { teamId, sandboxId, audience } = input;
    if (typeof audience !== 'string' || audience.length === 0) throw new Error('a workload token needs a non-empty audience');
    const ttlSec = input.ttlSec ?? this.maxTtlSec;
    if (!Number.isInteger(ttlSec) || ttlSec <= 0) throw new Error(`ttlSec must be a positive whole number of seconds, not ${String(ttlSec)}`);
    checkSpiffeSegment('teamId', teamId);
    checkSpiffeSegment('sandboxId', sandboxId);

    const nowMs = this.now();
    const key = activeKeyAt(this.keys, nowMs);
    if (!key) throw new Error('the workload identity issuer has no active signing key (start() not run, or it failed)');
    const iat = Math.floor(nowMs / 1000);
    const exp = iat + Math.min(ttlSec, this.maxTtlSec);
    const claims = {
      iss: this.issuerUrl,
      sub: `spiffe://${this.trustDomain}/team/${teamId}/sandbox/${sandboxId}`,
      aud: audience,
      iat,
      nbf: iat,
      exp,
      jti: randomUUID(),
    };
    return { token: sign(key.header, claims, key.privateKey), expiresAt: exp };
  }

  /** Every key a valid token may be signed with: pre-published, active, and retired ones still needed. */
  jwks(): JwkSet {
    const now = this.now();
    return { keys: this.keys.filter((k, i) => !this.isExpired(i, now)).map((k) => k.jwk) };
  }

  openidConfiguration(): OpenIdConfiguration {
    return {
      issuer: this.issuerUrl,
      jwks_uri: `${this.issuerUrl}/.well-known/jwks.json`,
      response_types_supported: ['id_token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
      claims_supported: ['sub', 'aud', 'exp', 'iat', 'iss', 'nbf', 'jti'],
    };
  }

  private async rotate(): Promise<void> {
    await this.reload();
    const now = this.now();
    let changed = false;
    const active = activeKeyAt(this.keys, now);
    if (!active) {
      await this.addKey(now, now);
      changed = true;
    } else if (active === this.keys[this.keys.length - 1]) {
      const rotateAt = active.activeFrom + this.rotateEveryMs;
      // Late (masters were down): the next key still gets its full pre-publication.
      if (now >= rotateAt - this.prePublishMs) {
        await this.addKey(now, Math.max(rotateAt, now + this.prePublishMs));
        changed = true;
      }
    }
    for (const [i, key] of this.keys.entries()) {
      if (!this.isExpired(i, now)) continue;
      await this.store.remove(key.kid);
      changed = true;
    }
    // Another master may have added a key at the same moment: the shared order settles which signs.
    if (changed) await this.reload();
  }

  /** Whether keys[i] was superseded long enough ago that every token it signed has expired. */
  private isExpired(i: number, now: number): boolean {
    const successor = this.keys[i + 1];
    return successor !== undefined && now >= successor.activeFrom + this.maxTtlSec * 1000 + RETIRED_KEY_GRACE_MS;
  }

  private async addKey(createdAt: number, activeFrom: number): Promise<void> {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    await this.store.add({ kid: publicJwk(privateKey).kid, privateKeyPem, createdAt, activeFrom });
  }

  private async reload(): Promise<void> {
    const known = new Map(this.keys.map((k) => [k.kid, k]));
    const stored = await this.store.list();
    const keys = stored.map((s) => {
      const cached = known.get(s.kid);
      if (cached && cached.activeFrom === s.activeFrom) return cached;
      const privateKey = createPrivateKey(s.privateKeyPem);
      const jwk = Object.freeze(publicJwk(privateKey));
      if (jwk.kid !== s.kid) throw new Error(`stored signing key ${s.kid} does not match its kid (its thumbprint is ${jwk.kid})`);
      return { kid: s.kid, createdAt: s.createdAt, activeFrom: s.activeFrom, privateKey, jwk, header: { alg: 'ES256', typ: 'JWT', kid: s.kid } } satisfies SigningKey;
    });
    this.keys = keys.sort((a, b) => a.activeFrom - b.activeFrom || (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0));
  }
}

/** The newest key whose activeFrom has come. */
function activeKeyAt(keys: SigningKey[], now: number): SigningKey | undefined {
  for (let i = keys.length - 1; i >= 0; i--) if (keys[i].activeFrom <= now) return keys[i];
  return undefined;
}

function checkIssuerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch (err) {
    throw new Error(`issuerUrl ${JSON.stringify(raw)} is not a URL: ${(err as Error).message}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`issuerUrl ${raw} must be https (http only for local tests)`);
  if (url.search || url.hash || url.username || url.password) throw new Error(`issuerUrl ${raw} must have no query, fragment or credentials`);
  // Verifiers compare iss byte for byte with the configured provider URL; do not guess a normal form.
  if (raw.endsWith('/')) throw new Error(`issuerUrl ${raw} must not end with a slash`);
  return raw;
}

function checkSpiffeSegment(name: string, value: string): void {
  if (typeof value !== 'string' || !SPIFFE_SEGMENT.test(value) || value === '.' || value === '..') {
    throw new Error(`${name} ${JSON.stringify(value)} cannot be a SPIFFE ID segment (letters, digits, '.', '-', '_')`);
  }
}
