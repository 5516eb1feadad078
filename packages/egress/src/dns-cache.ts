import { promises as dns } from 'node:dns';

/** How long an answer is reused; the system resolver gives no TTL, so a short fixed one (Envoy's and nginx's caches take the record's). */
const DNS_CACHE_TTL_MS = 10_000;
/** Names kept at most; past it the oldest answer is forgotten. */
const MAX_NAMES = 10_000;

type Lookup = (host: string) => Promise<string>;

const systemLookup: Lookup = async (host) => (await dns.lookup(host, { family: 4 })).address;

/**
 * The upstreams' IPv4 addresses by name, each looked up once per DNS_CACHE_TTL_MS: a lookup was
 * a getaddrinfo on libuv's thread pool for every request from a sandbox. Lookups of one name at
 * once share one call; a failure is not kept (the next request asks again).
 */
export class DnsCache {
  private readonly answers = new Map<string, { ip: string; until: number }>();
  private readonly pending = new Map<string, Promise<string>>();

  constructor(private readonly lookup: Lookup = systemLookup, private readonly ttlMs = DNS_CACHE_TTL_MS, private readonly now = () => performance.now()) {}

  /** The cached answer, when fresh; else undefined. */
  cached(host: string): string | undefined {
    const hit = this.answers.get(host);
    if (hit === undefined) return undefined;
    if (hit.until > this.now()) return hit.ip;
    this.answers.delete(host);
    return undefined;
  }

  /** The address of `host`, from the cache or a lookup; rejects with the lookup's error. */
  resolve(host: string): Promise<string> {
    const hit = this.cached(host);
    if (hit !== undefined) return Promise.resolve(hit);
    let inFlight = this.pending.get(host);
    if (inFlight === undefined) {
      inFlight = this.lookup(host).then((ip) => {
        if (this.answers.size >= MAX_NAMES) this.answers.delete(this.answers.keys().next().value as string);
        this.answers.set(host, { ip, until: this.now() + this.ttlMs });
        return ip;
      }).finally(() => this.pending.delete(host));
      this.pending.set(host, inFlight);
    }
    return inFlight;
  }
}
