import { isIP } from 'node:net';

/**
 * One written form per address, for comparing addresses a user or a resolver gave against the
 * platform's own: IPv6 compressed and lower-case (`0:0:0:0:0:0:0:1` is `::1`), an IPv4-mapped
 * IPv6 address in any of its forms (`::ffff:127.0.0.1`, `::ffff:7f00:1`,
 * `0:0:0:0:0:ffff:7f00:1`) as the IPv4 address it reaches, and a zone id dropped. Anything else,
 * IPv4 and names, comes back as it came. Checks that compared written forms let the host's
 * loopback through (docs/security.md): the template center's registry hops and the master's
 * webhook and SOCKS5 endpoint checks use this one.
 */
export function canonicalAddress(raw: string): string {
  const bare = raw.includes('%') ? raw.slice(0, raw.indexOf('%')) : raw;
  if (isIP(bare) !== 6) return raw;
  const v6 = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!mapped) return v6;
  const hi = parseInt(mapped[1]!, 16);
  const lo = parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** A host that only this machine reaches: 127/8, ::1 in any written form, or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const a = canonicalAddress(host);
  return a === '::1' || (isIP(a) === 4 && a.startsWith('127.'));
}

/**
 * The client a budget is kept for: an IPv4 address itself (a mapped one unmapped), an IPv6
 * address as its /64, since one host holds a whole /64 and could take a new address per request.
 */
export function clientPrefix(address: string): string {
  const a = canonicalAddress(address);
  if (isIP(a) !== 6) return a;
  const [head = '', tail] = a.split('::');
  const before = head ? head.split(':') : [];
  const after = tail ? tail.split(':') : [];
  const groups = tail === undefined ? before : [...before, ...Array<string>(8 - before.length - after.length).fill('0'), ...after];
  return `${groups.slice(0, 4).map((g) => parseInt(g || '0', 16).toString(16)).join(':')}::/64`;
}
