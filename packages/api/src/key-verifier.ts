import { sameSecret, SvcError, UnreachableError } from '@svc/common';
import { ADMIN_KEY_ID, API_KEY_PATTERN, apiKeyHash, DEFAULT_TEAM_ID, NO_LIMITS, type KeyIdentity, type TeamsClient } from '@svc/contracts/teams';

/**
 * How long the gateway trusts what the master said of a key. A revoked key is refused by every
 * gateway within this time (docs/security.md), whatever gateway or master the revocation went to.
 */
export const KEY_CACHE_MS = 900;
const CACHE_MAX = 100_000;

/**
 * Turns a presented key into who it speaks for: the configured admin keys (the default team's
 * admin), or a team key the master knows by its hash, cached for KEY_CACHE_MS, refusals too.
 * undefined: the key opens nothing.
 */
export class KeyVerifier {
  private readonly cache = new Map<string, { identity?: KeyIdentity; until: number }>();

  constructor(private readonly adminKeys: string[], private readonly teams: Pick<TeamsClient, 'verify'>, private readonly now: () => number = Date.now) {}

  async verify(key: string): Promise<KeyIdentity | undefined> {
    // Every admin key is compared, so the time taken does not tell which one came close.
    if (this.adminKeys.map((k) => sameSecret(key, k)).includes(true)) {
      return { keyId: ADMIN_KEY_ID, teamId: DEFAULT_TEAM_ID, admin: true, limits: NO_LIMITS };
    }
    if (!API_KEY_PATTERN.test(key)) return undefined;
    const hash = apiKeyHash(key);
    const hit = this.cache.get(hash);
    const now = this.now();
    if (hit && hit.until > now) return hit.identity;
    let identity: KeyIdentity | undefined;
    try {
      identity = await this.teams.verify(hash);
    } catch (err) {
      if (!(err instanceof SvcError) || err.status !== 401) {
        throw new UnreachableError(`the API key could not be checked: the master did not answer (${(err as Error).message})`, 'the API key could not be checked: the master did not answer; retry shortly');
      }
    }
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(hash, { identity, until: now + KEY_CACHE_MS });
    return identity;
  }
}
