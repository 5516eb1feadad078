import { createHash } from 'node:crypto';
import type { Log } from './kernel.ts';

/** How long a token envd accepted is taken again without asking envd. */
const ACCEPTED_MS = 10_000;
const CHECK_TIMEOUT_MS = 2_000;
const MAX_REMEMBERED = 1_000;

export interface AccessRefusal {
  status: 401 | 503;
  message: string;
}

/**
 * Who calls a contexts route: the token's holder (or anyone, in an unsecured sandbox), or, in a
 * secured sandbox, someone who sent no token (the official SDKs send none on these routes).
 */
export type Caller = 'holder' | 'anonymous';

/**
 * Whether a request may run code: envd decides, by answering its /envs route to the token the
 * request brought (X-Access-Token), as it answers any of its own routes. A secured sandbox's envd
 * has a token and answers 401 without it; an unsecured one answers everyone, and so does this.
 *
 * The port is public whenever the sandbox's traffic is (allowPublicTraffic, the default), and a
 * sandbox's id is no secret (every download URL names it): without this check anyone who knew
 * the id ran code as root in a secured sandbox, and read the environment the host gave it. The
 * official SDKs send the token with each execution (JS and Python); E2B's own server does not
 * check it. On the contexts routes the official SDKs (JS 2.8.0, Python) send no token, svc's SDK
 * does: `caller` tells the two apart, and context-routes.ts decides what each may do.
 */
export class EnvdAccess {
  private readonly accepted = new Map<string, number>();

  constructor(private readonly url: string, private readonly log: Log) {}

  async check(token: string | undefined): Promise<AccessRefusal | undefined> {
    const key = createHash('sha256').update(token ?? '').digest('hex');
    if ((this.accepted.get(key) ?? 0) > Date.now()) return undefined;
    let status: number;
    try {
      const res = await fetch(this.url, { headers: token ? { 'x-access-token': token } : {}, signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) });
      await res.body?.cancel();
      status = res.status;
    } catch (err) {
      this.log('warn', `envd did not answer the access check (${(err as Error).message})`, { url: this.url });
      return { status: 503, message: `the access token could not be checked: envd did not answer (${(err as Error).message}); retry` };
    }
    if (status === 401 || status === 403) return { status: 401, message: 'this sandbox is secured: send its envd access token as X-Access-Token' };
    if (status !== 200) return { status: 503, message: `the access token could not be checked: envd answered ${status}; retry` };
    if (this.accepted.size >= MAX_REMEMBERED) this.accepted.clear();
    this.accepted.set(key, Date.now() + ACCEPTED_MS);
    return undefined;
  }

  /**
   * A token that was sent must be the sandbox's: 401 otherwise, 503 when envd cannot tell. No
   * token is the holder in an unsecured sandbox and `anonymous` in a secured one, or while envd
   * cannot tell (the least a caller may do, rather than no list at all while envd is down).
   */
  async caller(token: string | undefined): Promise<Caller | AccessRefusal> {
    const refused = await this.check(token);
    if (!refused) return 'holder';
    if (!token) return 'anonymous';
    return refused;
  }
}
