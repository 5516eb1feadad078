import { timingSafeEqual } from 'node:crypto';

/**
 * True when the route needs no traffic token, or one of the presented values equals it.
 * Compared in constant time so the token cannot be guessed byte by byte.
 */
export function trafficTokenAccepted(required: string | undefined, presented: string[] | undefined): boolean {
  if (required === undefined || required === '') return true;
  if (presented === undefined) return false;
  for (const p of presented) if (sameSecret(required, p)) return true;
  return false;
}

/**
 * The token guards the sandbox's own ports. envd's port is exempt, as in E2B: envd checks its
 * own access token (private sandboxes are always created secure), and the official SDK never
 * sends the traffic token to envd.
 */
export function trafficTokenApplies(route: { envdPort: number }, port: number): boolean {
  return port !== 0 && port !== route.envdPort;
}

export function sameSecret(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
