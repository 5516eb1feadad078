import { promises as dns } from 'node:dns';
import { withDeadline } from '@svc/common';

/** How long an answer is reused; the system resolver gives no TTL, so a short fixed one (Envoy's and nginx's caches take the record's). */
const DNS_CACHE_TTL_MS = 10_000;
/** Names kept at most (answers, and failures apart); past it the oldest is forgotten. */
const MAX_NAMES = 10_000;

export type Lookup = (host: string) => Promise<string>;

export interface DnsLimits {
  /** A lookup that has not answered by then fails for its waiters (getaddrinfo itself cannot be stopped and runs on). */
  timeoutMs: number;
  /** A failure (a timeout included) is the answer for this long: a name that does not resolve is not asked again at once. */
  failureTtlMs: number;
  /** Lookups one owner (a sandbox) may have running at once; past it, a DnsBusyError and no lookup. */
  maxInFlightPerOwner: number;
}

/** docs/egress.md "Known limits": 5 s to answer, a failure kept 5 s, 4 lookups running per sandbox. */
const DNS_LIMITS: DnsLimits = { timeoutMs: 5_000, failureTtlMs: 5_000, maxInFlightPerOwner: 4 };

const systemLookup: Lookup = async (host) => (await dns.lookup(host, { family: 4 })).address;

/** An owner already has its share of lookups running: this one was not started. */
export class DnsBusyError extends Error {
  readonly code = 'EBUSY';
}

/** The lookup gave no answer within DnsLimits.timeoutMs. */
export class DnsTimeoutError extends Error {
  readonly code = 'ETIMEOUT';
}

/**
 * The upstreams' IPv4 addresses by name, each looked up once per DNS_CACHE_TTL_MS: a lookup was
 * a getaddrinfo on libuv's thread pool for every request from a sandbox. Lookups of one name at
 * once share one call.
 *
 * A lookup holds a thread of that pool until the name's servers answer or the system resolver
 * gives up, and the pool serves every sandbox's lookups: a sandbox asking for names whose
 * nameserver never answers (`<random>.attacker-ns.example`) stalled the others'. So a waiter
 * gives up after a timeout, a failure is kept a while, and each owner (a sandbox) may have only
 * a few lookups running; one counts until getaddrinfo itself returns, when its thread is free.
 */
export class DnsCache {
  private readonly answers = new Map<string, { ip: string; until: number }>();
  private readonly failures = new Map<string, { error: Error; until: number }>();
  private readonly pending = new Map<string, Promise<string>>();
  private readonly running = new Map<string, number>();

  constructor(
    private readonly lookup: Lookup = systemLookup,
    private readonly ttlMs = DNS_CACHE_TTL_MS,
    private readonly now = () => performance.now(),
    private readonly limits: DnsLimits = DNS_LIMITS,
  ) {}

  get timeoutMs(): number { return this.limits.timeoutMs; }

  /** The cached answer, when fresh; else undefined. */
  cached(host: string): string | undefined {
    const hit = this.answers.get(host);
    if (hit === undefined) return undefined;
    if (hit.until > this.now()) return hit.ip;
    this.answers.delete(host);
    return undefined;
  }

  /**
   * The address of `host`, from the cache or a lookup; rejects with the lookup's error (kept for
   * failureTtlMs), a DnsTimeoutError, or a DnsBusyError when `owner` has its share running.
   */
  resolve(host: string, owner?: string): Promise<string> {
    const hit = this.cached(host);
    if (hit !== undefined) return Promise.resolve(hit);
    const failed = this.failures.get(host);
    if (failed !== undefined) {
      if (failed.until > this.now()) return Promise.reject(failed.error);
      this.failures.delete(host);
    }
    // A lookup of this name already running is joined, free: the budget is for lookups started
    // (each holds a thread of the resolver's pool), not for requests waiting on one (npm's 16
    // sockets to its registry wait on one lookup).
    const joined = this.pending.get(host);
    if (joined !== undefined) return this.waitFor(host, joined);
    if (owner !== undefined && (this.running.get(owner) ?? 0) >= this.limits.maxInFlightPerOwner) {
      return Promise.reject(new DnsBusyError(`${this.limits.maxInFlightPerOwner} name lookups of this sandbox are still running`));
    }
    const inFlight = this.lookup(host).then((ip) => {
      this.failures.delete(host);
      remember(this.answers, host, { ip, until: this.now() + this.ttlMs });
      return ip;
    }, (err: Error) => {
      this.fail(host, err);
      throw err;
    }).finally(() => this.pending.delete(host));
    this.pending.set(host, inFlight);
    if (owner !== undefined) this.hold(owner, inFlight);
    return this.waitFor(host, inFlight);
  }

  /** Counts the lookup against its owner until it ends, however it ends. */
  private hold(owner: string, lookup: Promise<string>): void {
    this.running.set(owner, (this.running.get(owner) ?? 0) + 1);
    const release = () => {
      const n = (this.running.get(owner) ?? 1) - 1;
      if (n > 0) this.running.set(owner, n);
      else this.running.delete(owner);
    };
    lookup.then(release, release);
  }

  private waitFor(host: string, lookup: Promise<string>): Promise<string> {
    return withDeadline(lookup, this.limits.timeoutMs, () => {
      const err = new DnsTimeoutError(`no answer within ${this.limits.timeoutMs / 1000} s`);
      this.fail(host, err);
      return err;
    });
  }

  private fail(host: string, error: Error): void {
    if (this.limits.failureTtlMs > 0) remember(this.failures, host, { error, until: this.now() + this.limits.failureTtlMs });
  }
}

function remember<T>(map: Map<string, T>, host: string, value: T): void {
  map.delete(host);
  if (map.size >= MAX_NAMES) map.delete(map.keys().next().value as string);
  map.set(host, value);
}
