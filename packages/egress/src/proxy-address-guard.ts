import { SvcError, type Logger } from '@svc/common';
import { ProxyAddressCheckClient } from '@svc/contracts/egress-routes';
import type { PlaceholderSource } from './placeholders.ts';
import { ProxyDialError } from './proxy-via.ts';

/** The master's answer for one address: resolves when the egress proxy may dial it, a 400 SvcError when not. */
export type ProxyAddressCheck = (ip: string, port: number) => Promise<void>;

/** The master's check (MASTER_EGRESS_ROUTES.checkProxyAddress), on the master the placeholders come from. */
export function masterProxyAddressCheck(source: PlaceholderSource): ProxyAddressCheck {
  const client = new ProxyAddressCheckClient(source.masterAddr, source.token);
  return (ip, port) => client.check(ip, port);
}

/** How long an address the master allowed is dialled without asking again. */
const ALLOWED_MS = 60_000;
/** How long a refusal stands: a sandbox that retries in a loop asks the master once in this time. */
const REFUSED_MS = 10_000;
/**
 * While the master does not answer, an address it allowed this recently is still dialled: the
 * same address, checked before, so nothing new is let through, and a master restart does not cut
 * every tunneled sandbox off.
 */
const STALE_ALLOWED_MS = 10 * 60_000;
const MAX_VERDICTS = 10_000;

interface Verdict {
  at: number;
  /** undefined: allowed; else the master's reason. */
  refusal?: string;
  /** The master did not answer: an allowed verdict still inside STALE_ALLOWED_MS stands, unasked, until then. */
  retryAt?: number;
}

/**
 * The dial-time check of a sandbox's own SOCKS5 proxy (docs/egress.md "Bring your own proxy"):
 * its name was checked when the sandbox was created or its network updated, but it is resolved
 * again at each dial, and a name may resolve elsewhere later (DNS rebinding). So before the egress
 * proxy connects, the master checks the address the name gave now, with the create's rule (not the
 * platform's own endpoints, not a sandbox pool). Verdicts are kept per address a short while, and
 * concurrent dials to one address share one question. A refusal, or no answer for an address not
 * allowed recently, fails the dial: nothing goes direct, and nothing reaches the address.
 */
export class ProxyAddressGuard {
  private readonly verdicts = new Map<string, Verdict>();
  private readonly asking = new Map<string, Promise<void>>();

  constructor(private readonly check: ProxyAddressCheck, private readonly logger: Logger, private readonly now: () => number = Date.now) {}

  /** Resolves when the proxy at ip:port may be dialled; throws ProxyDialError (EPROXYADDR refused, EPROXYCHECK unchecked) when not. */
  async allow(ip: string, port: number, where: string): Promise<void> {
    const key = `${ip}:${port}`;
    const v = this.verdicts.get(key);
    const now = this.now();
    if (v && (now - v.at < (v.refusal === undefined ? ALLOWED_MS : REFUSED_MS) || (v.retryAt !== undefined && now < v.retryAt && now - v.at < STALE_ALLOWED_MS))) return settle(v, where);
    let pending = this.asking.get(key);
    if (!pending) {
      pending = this.ask(key, ip, port).finally(() => this.asking.delete(key));
      this.asking.set(key, pending);
    }
    try {
      await pending;
    } catch (err) {
      throw new ProxyDialError(`the ${where} resolves to ${key}, which the platform could not check (${(err as Error).message}): not dialled`, 'EPROXYCHECK');
    }
    return settle(this.verdicts.get(key)!, where);
  }

  /** Asks the master and records its verdict; rejects only when there is none to go by. */
  private async ask(key: string, ip: string, port: number): Promise<void> {
    let refusal: string | undefined;
    try {
      await this.check(ip, port);
    } catch (err) {
      if (!(err instanceof SvcError && err.status === 400)) {
        const last = this.verdicts.get(key);
        if (last && last.refusal === undefined && this.now() - last.at < STALE_ALLOWED_MS) {
          this.logger.warn({ address: key, err: (err as Error).message }, 'egress: the master did not check a SOCKS5 proxy address; dialled on its earlier check');
          // Not asked again for a while: a master that hangs would otherwise hold every dial for the client's timeout.
          last.retryAt = this.now() + REFUSED_MS;
          return;
        }
        throw err;
      }
      refusal = err.message;
    }
    if (this.verdicts.size >= MAX_VERDICTS) this.verdicts.clear();
    this.verdicts.set(key, { at: this.now(), ...(refusal !== undefined ? { refusal } : {}) });
  }
}

function settle(v: Verdict, where: string): void {
  if (v.refusal !== undefined) throw new ProxyDialError(`the ${where} is refused: ${v.refusal}`, 'EPROXYADDR');
}
