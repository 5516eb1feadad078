/** IPv4 addresses as unsigned 32-bit numbers, and CIDR blocks: the one arithmetic of the node agent, the egress proxy and the configuration. */

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

/** A dotted-quad IPv4 address, each octet 0..255 without a leading sign. */
export function isIpv4(value: string): boolean {
  return IPV4.test(value);
}

export function ipToInt(ip: string): number {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) throw new Error(`not an IPv4 address: ${ip}`);
  return ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
}

export function intToIp(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** Parses "a.b.c.d/n" (or a bare address as /32) into its network number and prefix length. */
export function parseCidr(cidr: string): { base: number; prefix: number } {
  const m = /^(\d+\.\d+\.\d+\.\d+)(?:\/(\d{1,2}))?$/.exec(cidr.trim());
  if (!m) throw new Error(`not an IPv4 address or CIDR: ${cidr}`);
  const prefix = m[2] === undefined ? 32 : Number(m[2]);
  if (prefix > 32) throw new Error(`bad prefix length in ${cidr}`);
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return { base: (ipToInt(m[1]) & mask) >>> 0, prefix };
}
