import { clientPrefix, SvcError } from '@svc/common';
import { signedFileRequest, type SignedFileRequest } from '@svc/common/envd-signature';
import type { SandboxRoute } from '@svc/contracts/master-internal';

const REMEMBERED = 1_000;
const REMEMBER_MS = 60_000;
/**
 * Look-ups that found no sandbox, per client address and window: past it a 429. Each costs the
 * master one hash per secured sandbox, and anyone may send them (no key, no sandbox named), so
 * without a budget a flood of made-up signatures kept the master's CPU busy. The SDK's own URLs
 * miss only when they are wrong.
 */
const MISS_BUDGET = 20;
const MISS_WINDOW_MS = 10_000;
const CLIENTS_TRACKED = 10_000;
/**
 * Look-ups under way at once in this process: what clients with many addresses can make the
 * master do together. Each takes 4.4 µs a secured sandbox there (docs/benchmarks.md, "Signed
 * file URL look-up"); past it a 503 with Retry-After.
 */
const MAX_IN_FLIGHT = 8;

/**
 * Signed file URLs that name no sandbox: in the single-URL mode that `svc up` prints, the
 * official SDK's uploadUrl/downloadUrl are `E2B_SANDBOX_URL/files?path=...&signature=...`, with
 * neither a sandbox host nor the E2b-Sandbox-Id header. The sandbox is the one whose envd access
 * token produced the signature, which the master finds (one hash per live sandbox); a URL is
 * remembered for a minute, since browsers fetch the same one again (ranges, retries).
 */
export class SignedFileUrls {
  private readonly known = new Map<string, { sandboxId: string; until: number }>();
  private readonly misses = new Map<string, { count: number; since: number }>();
  private inFlight = 0;

  constructor(
    private readonly lookup: (req: SignedFileRequest) => Promise<SandboxRoute>,
    /** Keeps a route the look-up brought, so the request that follows needs no second one (BackendCache). */
    private readonly routes: { readonly epoch: number; set(route: SandboxRoute, epoch: number): void },
  ) {}

  /** True for `/files` with a `signature` parameter: worth a look-up rather than a 400. */
  static matches(url: string | undefined): boolean {
    return !!url && url.startsWith('/files?') && /[?&]signature=/.test(url);
  }

  /** The sandbox that signed the URL; 401 when none did; 429 for a client past its budget of misses. */
  async sandboxOf(method: string, url: string, address = ''): Promise<string> {
    // Whose budget a miss spends: an IPv6 client's /64 (one host holds them all).
    const client = clientPrefix(address);
    const req = signedFileRequest(method, new URLSearchParams(url.slice(url.indexOf('?') + 1)));
    const key = `${req.operation}\n${req.signature}\n${req.path}\n${req.username ?? ''}\n${req.expiration ?? ''}`;
    const hit = this.known.get(key);
    if (hit && hit.until > Date.now()) return hit.sandboxId;
    const spent = this.misses.get(client);
    if (spent && Date.now() - spent.since < MISS_WINDOW_MS && spent.count >= MISS_BUDGET) {
      throw new SvcError(429, `too many signed file URLs that no sandbox signed from ${client || 'this client'}; retry in ${MISS_WINDOW_MS / 1000} s`, { headers: { 'Retry-After': String(MISS_WINDOW_MS / 1000) } });
    }
    if (this.inFlight >= MAX_IN_FLIGHT) throw new SvcError(503, 'too many signed file URLs are being looked up right now; retry shortly', { headers: { 'Retry-After': '1' } });
    let route: SandboxRoute;
    const epoch = this.routes.epoch;
    this.inFlight++;
    try {
      route = await this.lookup(req);
    } catch (err) {
      if (err instanceof SvcError && (err.status === 401 || err.status === 400)) {
        this.missed(client);
        throw new SvcError(401, 'invalid signature: no sandbox signed this file URL');
      }
      throw new SvcError(503, 'sandbox routing is unavailable right now; retry shortly', { headers: { 'Retry-After': '1' } });
    } finally {
      this.inFlight--;
    }
    if (this.known.size >= REMEMBERED) this.known.delete(this.known.keys().next().value!);
    this.known.set(key, { sandboxId: route.sandboxId, until: Date.now() + REMEMBER_MS });
    this.routes.set(route, epoch);
    return route.sandboxId;
  }

  private missed(client: string): void {
    const now = Date.now();
    const spent = this.misses.get(client);
    if (spent && now - spent.since < MISS_WINDOW_MS) { spent.count++; return; }
    if (this.misses.size >= CLIENTS_TRACKED) this.misses.delete(this.misses.keys().next().value!);
    this.misses.delete(client);
    this.misses.set(client, { count: 1, since: now });
  }
}
