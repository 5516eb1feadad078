import type { EgressInject } from '@svc/contracts/egress';

/** Hop-by-hop headers (RFC 9110 7.6.1) and what only this hop may act on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'proxy-connection']);

/** Names the Connection headers list: hop-by-hop for this message too. */
function connectionListed(raw: string[]): Set<string> {
  const out = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1].split(',')) {
      const t = token.trim().toLowerCase();
      if (t) out.add(t);
    }
  }
  return out;
}

function isHopByHop(lower: string, listed: Set<string>): boolean {
  return HOP_BY_HOP.has(lower) || lower.startsWith('proxy-') || listed.has(lower);
}

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
 * hop-by-hop headers and Expect (the proxy answered 100-continue itself) removed, Host kept as
 * sent, and each injected header replacing every header of that name the client sent.
 */
export function upstreamRequestHeaders(raw: string[], inject: InjectedHeader[] = []): string[] {
  const listed = connectionListed(raw);
  const replaced = new Set(inject.map((h) => h.name.toLowerCase()));
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase();
    // Transfer-Encoding stays: the body is chunked again towards the upstream (forward-exchange.ts).
    if (isHopByHop(lower, listed) || lower === 'expect' || replaced.has(lower)) continue;
    out.push(raw[i], raw[i + 1]);
  }
  for (const h of inject) out.push(h.name, h.value);
  return out;
}

/**
 * The response headers sent to the sandbox: hop-by-hop headers removed, and Transfer-Encoding
 * too, since node frames the body towards the sandbox itself.
 */
export function sandboxResponseHeaders(raw: string[]): string[] {
  const listed = connectionListed(raw);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase();
    if (isHopByHop(lower, listed) || lower === 'transfer-encoding') continue;
    out.push(raw[i], raw[i + 1]);
  }
  return out;
}
