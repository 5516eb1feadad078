import { createHash, createPublicKey, sign as cryptoSign, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import type { EcPublicJwk, JwkSet } from '@svc/contracts/identity';

/**
 * ES256 JSON Web Tokens (RFC 7519, RFC 7518 §3.4) with node:crypto alone: enough to sign the
 * platform's workload tokens and to check them the way AWS STS or a GCP workload identity pool does.
 */

export interface JwtHeader {
  alg: 'ES256';
  typ?: string;
  kid: string;
}

export type JwtClaims = Record<string, unknown>;

export interface VerifyOptions {
  audience: string;
  issuer: string;
  /** Epoch milliseconds, like Date.now(); default the current time. */
  now?: number;
}

class JwtError extends Error {}

/** Leeway for clocks that disagree a little between the signer and the verifier. */
const CLOCK_SKEW_SEC = 60;

const ES256_SIGNATURE_BYTES = 64;

export function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** `header.payload.signature`, signed with a P-256 private key. */
export function sign(header: JwtHeader, claims: JwtClaims, privateKey: KeyObject): string {
  if (header.alg !== 'ES256') throw new JwtError(`only ES256 is supported, not ${JSON.stringify(header.alg)}`);
  assertP256(privateKey, 'private');
  const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  const signature = cryptoSign('sha256', Buffer.from(signingInput), { key: privateKey, dsaEncoding: 'ieee-p1363' });
  return `${signingInput}.${signature.toString('base64url')}`;
}

/** The public half of a P-256 key as a JWK, its kid the RFC 7638 thumbprint. */
export function publicJwk(key: KeyObject): EcPublicJwk {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  assertP256(publicKey, 'public');
  const { x, y } = publicKey.export({ format: 'jwk' });
  if (typeof x !== 'string' || typeof y !== 'string') throw new JwtError('the key did not export its x and y coordinates');
  return { kty: 'EC', crv: 'P-256', x, y, kid: jwkThumbprint({ crv: 'P-256', kty: 'EC', x, y }), alg: 'ES256', use: 'sig' };
}

/** RFC 7638: SHA-256 of the required members in lexicographic order, without whitespace. */
function jwkThumbprint(jwk: { crv: string; kty: string; x: string; y: string }): string {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
  return createHash('sha256').update(canonical).digest('base64url');
}

/** The token's claims once its signature, issuer, audience and times hold; otherwise a JwtError saying which failed. */
export function verifyJwt(token: string, jwks: JwkSet, opts: VerifyOptions): JwtClaims {
  const parts = token.split('.');
  if (parts.length !== 3) throw new JwtError('not a compact JWS: expected three dot-separated parts');
  const [encodedHeader, encodedClaims, encodedSignature] = parts;
  const header = decodeJsonPart(encodedHeader, 'header');
  if (header.alg !== 'ES256') throw new JwtError(`refused algorithm ${JSON.stringify(header.alg)}: only ES256 is accepted`);
  if (typeof header.kid !== 'string') throw new JwtError('the header names no kid');
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  if (!jwk) throw new JwtError(`kid ${header.kid} is not in the JWKS`);

  const signature = Buffer.from(encodedSignature, 'base64url');
  if (signature.length !== ES256_SIGNATURE_BYTES) throw new JwtError(`an ES256 signature is ${ES256_SIGNATURE_BYTES} bytes, this one ${signature.length}`);
  const signingInput = Buffer.from(`${encodedHeader}.${encodedClaims}`);
  if (!cryptoVerify('sha256', signingInput, { key: publicKeyOf(jwk), dsaEncoding: 'ieee-p1363' }, signature)) {
    throw new JwtError('the signature does not match');
  }

  const claims = decodeJsonPart(encodedClaims, 'payload');
  checkTimes(claims, Math.floor((opts.now ?? Date.now()) / 1000));
  if (claims.iss !== opts.issuer) throw new JwtError(`issuer ${JSON.stringify(claims.iss)} is not ${JSON.stringify(opts.issuer)}`);
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(opts.audience)) throw new JwtError(`audience ${JSON.stringify(claims.aud)} does not include ${JSON.stringify(opts.audience)}`);
  return claims;
}

function checkTimes(claims: JwtClaims, nowSec: number): void {
  const { exp, nbf, iat } = claims;
  if (typeof exp !== 'number') throw new JwtError('the token has no numeric exp');
  if (nowSec > exp + CLOCK_SKEW_SEC) throw new JwtError(`the token expired at ${exp} (now ${nowSec})`);
  if (nbf !== undefined && (typeof nbf !== 'number' || nowSec < nbf - CLOCK_SKEW_SEC)) throw new JwtError(`the token is not valid before ${String(nbf)} (now ${nowSec})`);
  if (iat !== undefined && (typeof iat !== 'number' || nowSec < iat - CLOCK_SKEW_SEC)) throw new JwtError(`the token was issued in the future (iat ${String(iat)}, now ${nowSec})`);
}

function decodeJsonPart(part: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch (err) {
    throw new JwtError(`the ${what} is not base64url JSON: ${(err as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new JwtError(`the ${what} is not a JSON object`);
  return value as Record<string, unknown>;
}

// Importing a JWK costs more than the verification itself; a JWKS object is reused across calls.
const importedKeys = new WeakMap<EcPublicJwk, KeyObject>();

function publicKeyOf(jwk: EcPublicJwk): KeyObject {
  let key = importedKeys.get(jwk);
  if (!key) {
    if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') throw new JwtError(`key ${jwk.kid} is not a P-256 EC key`);
    key = createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
    importedKeys.set(jwk, key);
  }
  return key;
}

function assertP256(key: KeyObject, type: 'private' | 'public'): void {
  if (key.type !== type) throw new JwtError(`expected a ${type} key, got a ${key.type} one`);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new JwtError(`ES256 needs a P-256 key, not ${key.asymmetricKeyType} ${key.asymmetricKeyDetails?.namedCurve ?? ''}`.trim());
  }
}
