/** A seeded pseudo-random generator (mulberry32): the same seed gives the same requests. */
export class Rng {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  float(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Rng.pick: nothing to pick from');
    return items[Math.floor(this.float() * items.length)];
  }

  alnum(n: number): string {
    const chars = 'abcdefghijklmnopqrstuvwxyz0123456789';
    let s = '';
    for (let i = 0; i < n; i++) s += chars[Math.floor(this.float() * chars.length)];
    return s;
  }

  /** An independent stream for one route, so adding a route does not shift the others' cases. */
  fork(label: string): Rng {
    let h = this.seed ^ 0x9e3779b9;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
    return new Rng(h >>> 0);
  }
}

/** SVC_FUZZ_SEED replays a run; otherwise a fresh seed, printed by the caller. */
export function seedFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SVC_FUZZ_SEED;
  if (raw === undefined || raw === '') return Math.floor(Math.random() * 2 ** 32) >>> 0;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n >= 2 ** 32) throw new Error(`SVC_FUZZ_SEED must be an integer in [0, 2^32), got ${JSON.stringify(raw)}`);
  return n;
}
