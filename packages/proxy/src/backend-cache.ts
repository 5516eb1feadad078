import { SvcError } from '@svc/common';
import type { SandboxRoute } from '@svc/contracts/master-internal';

/** Ids the master said it does not know, kept at most: a client asking for random ids fills no more. */
const MAX_MISSING = 10_000;

/**
 * See BackendCache. A failed kill (killing back to running or paused) purges nothing: its stale
 * refusal lasts one TTL at most.
 */
const CACHED_STATES: ReadonlySet<SandboxRoute['state']> = new Set(['running', 'paused', 'killing', 'terminated']);

interface Entry {
  route: SandboxRoute;
  expiresAt: number;
}

/**
 * sandboxId → route, as the master last answered, for a short TTL. Running, paused, killing and
 * terminated routes are kept: the master purges our cache on the moves that make them wrong (into
 * pausing or killing, into running or terminated by an event; packages/master state-table.ts),
 * and a paused route kept while a resume runs is answered as paused until that resume's purge
 * (with autoResume, the lifecycle replica's resume joins the one under way). Pausing and
 * resuming are asked again on every request, which waits for them to settle (route-gate.ts).
 * Paused and killing are kept because the token check runs on the route: not kept, each request
 * naming a paused sandbox, token or not, cost a master look-up. A kept paused route still wakes
 * a sandbox with autoResume at once: the gate resumes from the route it has.
 * Concurrent misses for one sandbox share one lookup.
 * The master's 404 is kept for the same TTL: a client polling an id that never existed (or
 * whose record is gone) cost a look-up a request (164 for 500, docs/data-plane.md). A new
 * sandbox's id cannot have been asked for before its create answered, and its announcement
 * (the prefetch, `load(id, true)`) forgets any such answer anyway.
 */
export class BackendCache {
  private readonly entries = new Map<string, Entry>();
  /** sandboxId → the master's 404 and when it stops being believed; oldest first. */
  private readonly missing = new Map<string, { err: SvcError; expiresAt: number }>();
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
  load(sandboxId: string, announced = false): Promise<SandboxRoute> {
    const pending = this.inflight.get(sandboxId);
    if (pending) return pending;
    const miss = this.missing.get(sandboxId);
    if (miss !== undefined) {
      if (!announced && miss.expiresAt > Date.now()) return Promise.reject(miss.err);
      this.missing.delete(sandboxId);
    }
    const epoch = this.epoch;
    const p = this.lookup(sandboxId)
      .then((route) => {
        this.set(route, epoch);
        return route;
      }, (err: unknown) => {
        if (err instanceof SvcError && err.status === 404 && epoch === this.purges) this.remember(sandboxId, err);
        throw err;
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
    if (CACHED_STATES.has(route.state)) {
      this.entries.set(route.sandboxId, { route, expiresAt: Date.now() + this.ttlMs });
    } else {
      this.entries.delete(route.sandboxId);
    }
  }

  private remember(sandboxId: string, err: SvcError): void {
    if (this.missing.size >= MAX_MISSING) this.missing.delete(this.missing.keys().next().value!);
    this.missing.set(sandboxId, { err, expiresAt: Date.now() + this.ttlMs });
  }

  /** Forgets the given sandboxes, or everything. */
  purge(sandboxIds?: string[]): number {
    this.purges++;
    if (sandboxIds === undefined) this.missing.clear();
    else for (const id of sandboxIds) this.missing.delete(id);
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
    for (const [id, m] of this.missing) if (m.expiresAt <= now) this.missing.delete(id);
  }
}
