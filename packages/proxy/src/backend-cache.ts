import type { SandboxRoute } from '@svc/contracts/master-internal';

interface Entry {
  route: SandboxRoute;
  expiresAt: number;
}

/**
 * sandboxId → route, as the master last answered, for a short TTL. Only routes whose state
 * cannot change without someone telling us (running, terminated) are kept; transient and
 * paused states are always asked again. Concurrent misses for one sandbox share one lookup.
 */
export class BackendCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<SandboxRoute>>();
  /** Bumped on every purge, so a lookup that started before a purge does not refill the cache. */
  private purges = 0;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly lookup: (sandboxId: string) => Promise<SandboxRoute>,
    private readonly ttlMs: number,
    private readonly onEvict: (route: SandboxRoute) => void = () => {},
  ) {
    this.sweeper = setInterval(() => this.dropExpired(), Math.max(1_000, ttlMs * 5));
    this.sweeper.unref();
  }

  /** The cached route when still fresh. The hot path: no allocation. */
  fresh(sandboxId: string): SandboxRoute | undefined {
    const e = this.entries.get(sandboxId);
    if (e === undefined) return undefined;
    if (e.expiresAt > Date.now()) return e.route;
    this.entries.delete(sandboxId);
    return undefined;
  }

  /** Asks the master (joining a lookup already under way) and caches the answer when cacheable. */
  load(sandboxId: string): Promise<SandboxRoute> {
    const pending = this.inflight.get(sandboxId);
    if (pending) return pending;
    const epoch = this.epoch;
    const p = this.lookup(sandboxId)
      .then((route) => {
        this.set(route, epoch);
        return route;
      })
      .finally(() => { this.inflight.delete(sandboxId); });
    this.inflight.set(sandboxId, p);
    return p;
  }

  /** Taken before a route is fetched elsewhere (a resume, a signed URL's look-up), and handed to set() with it. */
  get epoch(): number { return this.purges; }

  /**
   * Keeps a route fetched since `epoch` (this.epoch then). A purge since means the route may be
   * older than what the purge said (a pause, a kill): it is dropped, and the next request asks again.
   */
  set(route: SandboxRoute, epoch: number): void {
    if (epoch !== this.purges) return;
    if (route.state === 'running' || route.state === 'terminated') {
      this.entries.set(route.sandboxId, { route, expiresAt: Date.now() + this.ttlMs });
    } else {
      this.entries.delete(route.sandboxId);
    }
  }

  /** Forgets the given sandboxes, or everything. */
  purge(sandboxIds?: string[]): number {
    this.purges++;
    if (sandboxIds === undefined) {
      const n = this.entries.size;
      for (const e of this.entries.values()) this.onEvict(e.route);
      this.entries.clear();
      return n;
    }
    let n = 0;
    for (const id of sandboxIds) {
      const e = this.entries.get(id);
      if (e === undefined) continue;
      this.entries.delete(id);
      this.onEvict(e.route);
      n++;
    }
    return n;
  }

  get size() { return this.entries.size; }

  close() { clearInterval(this.sweeper); }

  private dropExpired() {
    const now = Date.now();
    for (const [id, e] of this.entries) if (e.expiresAt <= now) this.entries.delete(id);
  }
}
