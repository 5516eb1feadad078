/** IPv4 addresses and CIDR blocks, as the policies name them (arithmetic: @svc/common's ipv4). */
import { ipToInt, isIpv4 } from '@svc/common';

export { isIpv4 };

/** The socket's remote address as the policies name it: an IPv4-mapped IPv6 address loses its `::ffff:`. */
export function plainIpv4(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && isIpv4(address.slice(7)) ? address.slice(7) : address;
}

export interface Cidr {
  text: string;
  base: number;
  prefix: number;
}

/** `a.b.c.d/n` or a bare address (a /32); undefined when it is neither. */
export function parseCidr(text: string): Cidr | undefined {
  const [ip, bits, ...rest] = text.trim().split('/');
  if (rest.length || !isIpv4(ip)) return undefined;
  const prefix = bits === undefined ? 32 : /^\d{1,2}$/.test(bits) ? Number(bits) : NaN;
  if (!(prefix >= 0 && prefix <= 32)) return undefined;
  return { text: text.trim(), base: ipToInt(ip), prefix };
}

function cidrContains(cidr: Cidr, ip: string): boolean {
  if (!isIpv4(ip)) return false;
  if (cidr.prefix === 0) return true;
  const shift = 32 - cidr.prefix;
  // >>> keeps the comparison unsigned for addresses at or above 128.0.0.0
  return (ipToInt(ip) >>> shift) === (cidr.base >>> shift);
}

/** The first CIDR of the list that holds the address. */
export function firstContaining(list: string[], ip: string): string | undefined {
  for (const text of list) {
    const c = parseCidr(text);
    if (c && cidrContains(c, ip)) return text;
  }
  return undefined;
}
