import { isIpv4 } from './ipv4.ts';

/** A host name as rules compare it: lower case, no trailing dot, no `:port`. */
export function normalizeHost(name: string): string {
  let h = name.trim().toLowerCase();
  if (h.startsWith('[')) {
    // An IPv6 literal keeps its colons; only a port after the bracket goes.
    const close = h.indexOf(']');
    h = close === -1 ? h : h.slice(1, close);
  } else {
    const colon = h.lastIndexOf(':');
    if (colon !== -1 && h.indexOf(':') === colon) h = h.slice(0, colon);
  }
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/**
 * Whether a rule's host or SNI pattern holds for a name. `*.example.com` matches any subdomain
 * at any depth but not `example.com` itself; an IPv4 pattern matches only that address.
 */
export function hostMatches(pattern: string, name: string): boolean {
  const p = normalizeHost(pattern);
  const n = normalizeHost(name);
  if (!p || !n) return false;
  if (isIpv4(p)) return p === n;
  if (p.startsWith('*.')) {
    const suffix = p.slice(1); // ".example.com"
    return n.length > suffix.length && n.endsWith(suffix) && !isIpv4(n);
  }
  return p === n;
}
