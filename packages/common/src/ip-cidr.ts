import { isIP } from 'node:net';
import { canonicalAddress } from './ip-address.ts';
import { ipToInt } from './ipv4.ts';

/**
 * IPv4 and IPv6 networks alike, for settings that name either (api.trusted_proxies) and for
 * checks that must see through IPv6 forms carrying an IPv4 address (webhook targets). ipv4.ts
 * keeps the IPv4-only arithmetic the node agent and the egress proxy use.
 */
export interface IpCidr {
  family: 4 | 6;
  /** The network's address as a number (32 or 128 bits), host bits cleared. */
  base: bigint;
  prefix: number;
}

/** Parses "a.b.c.d/n", "x:y::z/n" or a bare address (a /32 or /128); throws an Error naming what is wrong. */
export function parseIpCidr(text: string): IpCidr {
  const [raw = '', length, extra] = text.trim().split('/');
  const address = canonicalAddress(raw);
  const family = isIP(address);
  if (extra !== undefined || family === 0) throw new Error(`not an IP address or CIDR: ${JSON.stringify(text)}`);
  // An IPv4-mapped form (::ffff:10.0.0.0/104) is the IPv4 network it maps.
  const mappedShift = family === 4 && isIP(raw) === 6 ? 96 : 0;
  const bits = family === 4 ? 32 : 128;
  if (length !== undefined && !/^\d{1,3}$/.test(length)) throw new Error(`bad prefix length in ${JSON.stringify(text)}`);
  const prefix = length === undefined ? bits : Number(length) - mappedShift;
  if (prefix < 0 || prefix > bits) throw new Error(`bad prefix length in ${JSON.stringify(text)}`);
  const f = family as 4 | 6;
  return { family: f, base: addressNumber(address, f) & maskOf(prefix, bits), prefix };
}

/** Whether `address` (any written form; an IPv4-mapped one as its IPv4 address) lies in `cidr`. */
export function inIpCidr(address: string, cidr: IpCidr): boolean {
  const a = canonicalAddress(address);
  const family = isIP(a);
  if (family !== cidr.family) return false;
  const bits = family === 4 ? 32 : 128;
  return (addressNumber(a, cidr.family) & maskOf(cidr.prefix, bits)) === cidr.base;
}

/**
 * The IPv4 address an IPv6 one carries and reaches: IPv4-compatible (::a.b.c.d),
 * IPv4-translated (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48,
 * RFC 8215) and 6to4 (2002:aabb:ccdd::/48). IPv4-mapped (::ffff:a.b.c.d) canonicalAddress
 * already turns into IPv4. undefined: not such a form (or not IPv6).
 */
export function embeddedIpv4(address: string): string | undefined {
  const a = canonicalAddress(address);
  if (isIP(a) !== 6) return undefined;
  const g = ipv6Groups(a);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  // :: and ::1 are no IPv4-compatible addresses.
  if (zero(0, 6) && (g[6] !== 0 || g[7]! > 1)) return v4(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && (zero(2, 6) || g[2] === 1)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return undefined;
}

/** The eight 16-bit groups of an IPv6 address in canonicalAddress's form (hex groups, one `::` at most). */
function ipv6Groups(a: string): number[] {
  const [head, tail] = a.split('::');
  const parse = (s: string | undefined) => (s ? s.split(':') : []).flatMap((g) => {
    // A dotted IPv4 tail is two groups.
    if (!g.includes('.')) return [parseInt(g, 16)];
    const n = ipToInt(g);
    return [n >>> 16, n & 0xffff];
  });
  const before = parse(head);
  const after = parse(tail);
  return tail === undefined ? before : [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

function addressNumber(a: string, family: 4 | 6): bigint {
  if (family === 4) return BigInt(ipToInt(a));
  return ipv6Groups(a).reduce((n, g) => (n << 16n) | BigInt(g), 0n);
}

function maskOf(prefix: number, bits: number): bigint {
  const all = (1n << BigInt(bits)) - 1n;
  return prefix === 0 ? 0n : (all >> BigInt(bits - prefix)) << BigInt(bits - prefix);
}
