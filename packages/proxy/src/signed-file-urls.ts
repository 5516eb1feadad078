import { SvcError } from '@svc/common';
import { signedFileRequest, type SignedFileRequest } from '@svc/common/envd-signature';
import type { SandboxRoute } from '@svc/contracts/master-internal';

const REMEMBERED = 1_000;
const REMEMBER_MS = 60_000;

/**
 * Signed file URLs that name no sandbox: in the single-URL mode that `svc up` prints, the
 * official SDK's uploadUrl/downloadUrl are `E2B_SANDBOX_URL/files?path=...&signature=...`, with
 * neither a sandbox host nor the E2b-Sandbox-Id header. The sandbox is the one whose envd access
 * token produced the signature, which the master finds (one hash per live sandbox); a URL is
 * remembered for a minute, since browsers fetch the same one again (ranges, retries).
 */
export class SignedFileUrls {
  private readonly known = new Map<string, { sandboxId: string; until: number }>();

  constructor(
    private readonly lookup: (req: SignedFileRequest) => Promise<SandboxRoute>,
    /** Keeps a route the look-up brought, so the request that follows needs no second one. */
    private readonly remember: (route: SandboxRoute) => void,
  ) {}

  /** True for `/files` with a `signature` parameter: worth a look-up rather than a 400. */
  static matches(url: string | undefined): boolean {
    return !!url && url.startsWith('/files?') && /[?&]signature=/.test(url);
  }

  /** The sandbox that signed the URL; 401 when none did. */
  async sandboxOf(method: string, url: string): Promise<string> {
    const req = signedFileRequest(method, new URLSearchParams(url.slice(url.indexOf('?') + 1)));
    const key = `${req.operation}\n${req.signature}\n${req.path}\n${req.username ?? ''}\n${req.expiration ?? ''}`;
    const hit = this.known.get(key);
    if (hit && hit.until > Date.now()) return hit.sandboxId;
    let route: SandboxRoute;
    try {
      route = await this.lookup(req);
    } catch (err) {
      if (err instanceof SvcError && (err.status === 401 || err.status === 400)) throw new SvcError(401, 'invalid signature: no sandbox signed this file URL');
      throw new SvcError(503, 'sandbox routing is unavailable right now; retry shortly', { headers: { 'Retry-After': '1' } });
    }
    if (this.known.size >= REMEMBERED) this.known.delete(this.known.keys().next().value!);
    this.known.set(key, { sandboxId: route.sandboxId, until: Date.now() + REMEMBER_MS });
    this.remember(route);
    return route.sandboxId;
  }
}
