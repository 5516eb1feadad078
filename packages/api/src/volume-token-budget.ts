import { createHash } from 'node:crypto';
import type { MinuteCounter } from './rate-limits.ts';
import { tooManyRequests } from './rate-limits.ts';

const KNOWN_GOOD_MS = 15 * 60_000;
const MAX_KNOWN_GOOD = 10_000;

/**
 * The failed-check budget for E2B's volume content calls, which carry the volume's token as
 * their bearer and skip the key check (auth.ts): the master checks the token, and until
 * 2026-12-01 a wrong one cost a client nothing here, so a stream of guesses reached the master
 * at whatever rate the client chose (left open at stop 57). A 401 from the master now counts
 * against the client's budget like a bad key; over it, only tokens the master accepted here in
 * the last 15 minutes are passed on (a good token keeps working behind a shared address, as a
 * good key does, key-verifier.ts).
 */
export class VolumeTokenBudget {
  private readonly knownGood = new Map<string, number>();

  constructor(private readonly failures: MinuteCounter, private readonly limit: number, private readonly now: () => number = Date.now) {}

  /** Before the call goes to the master: a 429 when the client is over its budget and the token is not known good. */
  admit(client: string, token: string): void {
    const blocked = this.failures.over(client, this.limit);
    if (!blocked || (this.knownGood.get(hash(token)) ?? 0) > this.now()) return;
    throw tooManyRequests(`too many failed volume token checks from ${client} (${blocked.count} this minute; the limit is ${this.limit}); retry in ${blocked.retryAfterSec} s`, blocked.retryAfterSec);
  }

  /** After the master answered: a 401 is a failed check; any other answer but a 429 means the token is good. */
  settle(client: string, token: string, status: number): void {
    if (status === 401) {
      this.failures.add(client);
      return;
    }
    if (status === 429) return;
    const key = hash(token);
    this.knownGood.delete(key);
    // The oldest entry makes room: a Map iterates in insertion order.
    if (this.knownGood.size >= MAX_KNOWN_GOOD) this.knownGood.delete(this.knownGood.keys().next().value!);
    this.knownGood.set(key, this.now() + KNOWN_GOOD_MS);
  }
}

const hash = (token: string) => createHash('sha256').update(token).digest('base64url');
