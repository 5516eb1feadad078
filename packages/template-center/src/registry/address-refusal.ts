import { isIP } from 'node:net';
import { canonicalAddress, hostAddresses, ipToInt, parseCidr } from '@svc/common';

/** Why an address is no place to send a pull for a registry the operator did not name. */
export interface AddressRefusal {
  /** The address in its one written form (canonicalAddress), or the IPv4 address it carries. */
  address: string;
  /** "is loopback", "is private (RFC 1918)", ... */
  reason: string;
  /** It reaches the template center's own host (loopback, this host, link-local, an own address). */
  onHost: boolean;
}

const cidrs = (list: Array<[string, string]>) => list.map(([cidr, reason]) => ({ ...parseCidr(cidr), reason }));

/** The host itself, by any of these: the services beside the template center (master, node agent, database). */
const HOST_V4 = cidrs([
  ['127.0.0.0/8', 'is loopback'],
  ['0.0.0.0/8', 'means this host'],
  // Cloud metadata (169.254.169.254) answers here with the machine's credentials.
  ['169.254.0.0/16', 'is link-local'],
]);

/**
 * Networks that are no registry's on the internet: the operator's own (the platform's
 * components, the database, other teams' sandboxes, a cloud's services such as Alibaba's
 * metadata at 100.100.100.200). A team naming one had the template center send registry-shaped
 * GETs there and read the answers back in its build's errors (found by a helper reading the
 * template center as an attacker).
 */
const PRIVATE_V4 = cidrs([
  ['10.0.0.0/8', 'is private (RFC 1918)'],
  ['172.16.0.0/12', 'is private (RFC 1918)'],
  ['192.168.0.0/16', 'is private (RFC 1918)'],
  ['100.64.0.0/10', 'is shared address space (RFC 6598)'],
  ['198.18.0.0/15', 'is a benchmarking network (RFC 2544)'],
  ['224.0.0.0/4', 'is multicast'],
  ['240.0.0.0/4', 'is reserved'],
]);

const inCidr = (ip: number, c: { base: number; prefix: number }) => c.prefix === 0 || (ip >>> (32 - c.prefix)) === (c.base >>> (32 - c.prefix));

/**
 * Why the template center may not connect to `raw` for a registry the operator did not name
 * (template_center.host_registries), or undefined. IPv6 forms that carry an IPv4 address (mapped,
 * compatible, NAT64, 6to4) are judged by that address: `[64:ff9b::a00:5]` reaches 10.0.0.5
 * through a NAT64 gateway.
 */
export function addressRefusal(raw: string): AddressRefusal | undefined {
  const a = canonicalAddress(raw);
  if (isIP(a) === 0) return undefined; // a name: its addresses are judged, once resolved
  const embedded = isIP(a) === 6 ? embeddedV4(expandV6(a)) : undefined;
  const why = refusal(embedded ?? a);
  if (!why || !embedded) return why && { address: a, ...why };
  return { address: a, reason: `carries ${embedded}, which ${why.reason}`, onHost: why.onHost };
}

function refusal(a: string): Omit<AddressRefusal, 'address'> | undefined {
  const v4 = isIP(a) === 4 ? ipToInt(a) : undefined;
  const top = v4 === undefined ? expandV6(a)[0] : 0;
  const host = v4 !== undefined ? HOST_V4.find((c) => inCidr(v4, c))?.reason
    : a === '::1' ? 'is loopback' : a === '::' ? 'means this host' : (top & 0xffc0) === 0xfe80 ? 'is link-local' : undefined;
  if (host) return { reason: host, onHost: true };
  if (hostAddresses().some((h) => canonicalAddress(h) === a)) return { reason: 'is an address of this host', onHost: true };
  const other = v4 !== undefined ? PRIVATE_V4.find((c) => inCidr(v4, c))?.reason
    : (top & 0xfe00) === 0xfc00 ? 'is a unique local address (private, RFC 4193)'
      : (top & 0xffc0) === 0xfec0 ? 'is site-local (private)'
        : (top & 0xff00) === 0xff00 ? 'is multicast' : undefined;
  return other === undefined ? undefined : { reason: other, onHost: false };
}

/** The eight 16-bit groups of a compressed IPv6 address (as canonicalAddress writes it). */
function expandV6(a: string): number[] {
  const [head, tail] = a.split('::');
  const parse = (s: string | undefined) => (s ? s.split(':') : []).flatMap((g) => {
    // A dotted IPv4 tail (::ffff:1.2.3.4 that canonicalAddress left as it was) is two groups.
    if (!g.includes('.')) return [parseInt(g, 16)];
    const n = ipToInt(g);
    return [n >>> 16, n & 0xffff];
  });
  const before = parse(head);
  const after = parse(tail);
  return tail === undefined ? before : [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/**
 * The IPv4 address an IPv6 one carries: IPv4-compatible (::a.b.c.d), IPv4-translated
 * (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48, RFC 8215), 6to4
 * (2002:aabb:ccdd::/48). IPv4-mapped (::ffff:a.b.c.d) canonicalAddress has turned into IPv4 already.
 */
function embeddedV4(g: number[]): string | undefined {
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 6) && (g[6] !== 0 || g[7] > 1)) return v4(g[6], g[7]);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && (zero(2, 6) || g[2] === 1)) return v4(g[6], g[7]);
  if (g[0] === 0x2002) return v4(g[1], g[2]);
  return undefined;
}
