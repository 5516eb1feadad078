import { SvcError } from '@svc/common';

const WINDOW_MS = 60_000;
const MAX_TRACKED = 100_000;

/**
 * Counts events per key in a fixed one-minute window; over `limit`, 429 with Retry-After for
 * the rest of the window. Used for failed key checks per source address and for each team's
 * request rate (docs/security.md, "Quotas").
 */
export class MinuteCounter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  constructor(private readonly now: () => number = Date.now) {}

  /** Whether `key` is already over `limit` this minute (without counting). */
  over(key: string, limit: number): { retryAfterSec: number; count: number } | undefined {
    if (limit <= 0) return undefined;
    const w = this.current(key);
    if (!w || w.count < limit) return undefined;
    return { retryAfterSec: Math.max(1, Math.ceil((w.start + WINDOW_MS - this.now()) / 1000)), count: w.count };
  }

  add(key: string): number {
    const w = this.current(key) ?? { start: this.now(), count: 0 };
    w.count++;
    if (!this.windows.has(key) && this.windows.size >= MAX_TRACKED) this.sweep();
    this.windows.set(key, w);
    return w.count;
  }

  private current(key: string) {
    const w = this.windows.get(key);
    if (w && this.now() - w.start < WINDOW_MS) return w;
    if (w) this.windows.delete(key);
    return undefined;
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, w] of this.windows) if (now - w.start >= WINDOW_MS) this.windows.delete(k);
    // Still full (a flood of distinct keys): start over rather than grow without bound.
    if (this.windows.size >= MAX_TRACKED) this.windows.clear();
  }
}

export function tooManyRequests(message: string, retryAfterSec: number): SvcError {
  return new SvcError(429, message, { headers: { 'Retry-After': String(retryAfterSec) } });
}
