import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * svc's one comparison of a presented secret (API key, access or traffic token, callback token,
 * file signature) with the expected one. Both are hashed first, so the comparison is of equal
 * lengths in constant time: neither the content nor the length leaks through timing.
 */
export function sameSecret(presented: string | Uint8Array, expected: string | Uint8Array): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
