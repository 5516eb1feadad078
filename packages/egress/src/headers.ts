import type { EgressInject } from '@svc/contracts/egress';
import { droppableWhenListed } from '@svc/http1';

/** Hop-by-hop headers (RFC 9110 7.6.1) and what only this hop may act on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'proxy-connection']);

/**
 * The headers without the hop-by-hop ones (those of HOP_BY_HOP, Proxy-*, and the names their
 * Connection headers list) and those `drop` names, flat [name, value, ...] in the sender's order
 * and case. Each name is lowered once: this runs twice on every proxied request.
 */
function endToEnd(raw: string[], drop: (lower: string) => boolean): string[] {
  const lower = new Array<string>(raw.length >> 1);
  let listed: Set<string> | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    lower[i >> 1] = name;
    if (name !== 'connection') continue;
    for (const token of raw[i + 1].split(',')) {
      const t = token.trim().toLowerCase();
      if (t && droppableWhenListed(t)) (listed ??= new Set()).add(t);
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = lower[i >> 1];
    if (HOP_BY_HOP.has(name) || name.startsWith('proxy-') || listed?.has(name) || drop(name)) continue;
    out.push(raw[i], raw[i + 1]);
  }
  return out;
}

const isExpect = (name: string) => name === 'expect';
const isTransferEncoding = (name: string) => name === 'transfer-encoding';

export interface InjectedHeader {
  name: string;
  value: string;
}

/** Inject headers with their values: the format with every `${SECRET}` replaced by the secret. */
export function injectedHeaders(inject: EgressInject[]): InjectedHeader[] {
  // split/join, not String.replace: a `$&` or `$1` in a secret must stay literal.
  return inject.map((i) => ({ name: i.header, value: (i.format ?? '${SECRET}').split('${SECRET}').join(i.secret) }));
}

/**
 * The request headers sent upstream, flat [name, value, ...] in the client's order and case:
 * hop-by-hop headers and Expect (the proxy answered 100-continue itself) removed, and each
 * injected header replacing every header of that name the client sent. Host goes as sent, except
 * that `host`, given for an absolute-form request (request-target.ts), replaces it, first in line
 * (RFC 9112 3.2.2): the upstream gets the authority the rules and the Host/SNI guard saw.
 */
export function upstreamRequestHeaders(raw: string[], inject: InjectedHeader[] = [], host?: string): string[] {
  // Transfer-Encoding stays: the body is chunked again towards the upstream (forward-exchange.ts).
  if (inject.length === 0 && host === undefined) return endToEnd(raw, isExpect);
  const replaced = new Set(inject.map((h) => h.name.toLowerCase()));
  if (host !== undefined) replaced.add('host');
  const out = endToEnd(raw, (name) => name === 'expect' || replaced.has(name));
  if (host !== undefined) out.unshift('Host', host);
  for (const h of inject) out.push(h.name, h.value);
  return out;
}

/**
 * The response headers sent to the sandbox: hop-by-hop headers removed, and Transfer-Encoding
 * too, since the proxy frames the body towards the sandbox itself.
 */
export function sandboxResponseHeaders(raw: string[]): string[] {
  return endToEnd(raw, isTransferEncoding);
}
