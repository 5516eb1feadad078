import { sameSecret, SvcError, UnreachableError } from '@svc/common';
import { ADMIN_KEY_ID, API_KEY_PATTERN, apiKeyHash, DEFAULT_TEAM_ID, NO_LIMITS, type KeyIdentity, type TeamsClient } from '@svc/contracts/teams';

/**
 * How long the gateway trusts what the master said of a key. A revoked key is refused by every
 * gateway within this time (docs/security.md), whatever gateway or master the revocation went to.
 */
export const KEY_CACHE_MS = 900;
const CACHE_MAX = 100_000;
/**
 * How long a key that verified stays known to this gateway as one that did: from a client over
 * its failed-check budget only such keys are looked up (auth.ts), so a good key keeps working
 * there while random keys cost no lookup. Known is not trusted: the key is still verified.
 */
const KNOWN_GOOD_MS = 15 * 60_000;
const KNOWN_GOOD_MAX = 10_000;

/**
 * Turns a presented key into who it speaks for: the configured admin keys (the default team's
 * admin), or a team key the master knows by its hash, cached for KEY_CACHE_MS, refusals too.
 * undefined: the key opens nothing.
 */
export class KeyVerifier {
  private readonly cache = new Map<string, { identity?: KeyIdentity; until: number }>();
  /** Hashes of keys that verified, and until when that is remembered; oldest first. */
  private readonly knownGood = new Map<string, number>();

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
    if (identity) {
      this.knownGood.delete(hash);
      if (this.knownGood.size >= KNOWN_GOOD_MAX) this.knownGood.delete(this.knownGood.keys().next().value!);
      this.knownGood.set(hash, now + KNOWN_GOOD_MS);
    }
    return identity;
  }

  /** Whether `key` is an admin key or verified here in the last KNOWN_GOOD_MS (it is verified again all the same). */
  knownToVerify(key: string): boolean {
    if (this.adminKeys.map((k) => sameSecret(key, k)).includes(true)) return true;
    if (!API_KEY_PATTERN.test(key)) return false;
    return (this.knownGood.get(apiKeyHash(key)) ?? 0) > this.now();
  }
}
