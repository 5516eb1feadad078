/** IPv4 addresses and CIDR blocks, as the policies name them. */

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

export function isIpv4(value: string): boolean {
  return IPV4.test(value);
}

/** The socket's remote address as the policies name it: an IPv4-mapped IPv6 address loses its `::ffff:`. */
export function plainIpv4(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && isIpv4(address.slice(7)) ? address.slice(7) : address;
}

function toInt(ip: string): number {
  return ip.split('.').reduce((acc, octet) => acc * 256 + Number(octet), 0);
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
  return { text: text.trim(), base: toInt(ip), prefix };
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  if (!isIpv4(ip)) return false;
  if (cidr.prefix === 0) return true;
  const shift = 32 - cidr.prefix;
  // >>> keeps the comparison unsigned for addresses at or above 128.0.0.0
  return (toInt(ip) >>> shift) === (cidr.base >>> shift);
}

/** The first CIDR of the list that holds the address. */
export function firstContaining(list: string[], ip: string): string | undefined {
  for (const text of list) {
    const c = parseCidr(text);
    if (c && cidrContains(c, ip)) return text;
  }
  return undefined;
}
