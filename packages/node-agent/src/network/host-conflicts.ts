import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { ipToInt } from '@svc/common';

/** A range of IPv4 addresses as unsigned 32-bit numbers, both ends included. */
export interface Range { first: number; last: number }

/** What the host's own network already uses, leaving out the interfaces this node agent made. */
export interface HostNetwork {
  /** Addresses on the host's interfaces. */
  addresses: { iface: string; address: number }[];
  /** Routes of the main table: destination range, prefix length and gateway (0 for none). */
  routes: { iface: string; range: Range; prefix: number; gateway: number }[];
}

const overlaps = (a: Range, b: Range) => a.first <= b.last && b.first <= a.last;
const inRange = (n: number, r: Range) => n >= r.first && n <= r.last;

/** /proc/net/route writes addresses as the kernel's little-endian hex. */
function procHex(hex: string): number {
  const n = parseInt(hex, 16) >>> 0;
  return (((n & 255) << 24) | (((n >>> 8) & 255) << 16) | (((n >>> 16) & 255) << 8) | (n >>> 24)) >>> 0;
}

function prefixOfMask(mask: number): number {
  let bits = 0;
  for (let m = mask; m & 0x80000000; m = (m << 1) >>> 0) bits++;
  return bits;
}

/** Reads the host network now; interfaces whose name starts with `ownPrefix` are left out. */
export function readHostNetwork(ownPrefix: string): HostNetwork {
  const foreign = (iface: string) => !iface.startsWith(ownPrefix);
  const addresses: HostNetwork['addresses'] = [];
  for (const [iface, list] of Object.entries(networkInterfaces())) {
    if (!foreign(iface)) continue;
    for (const a of list ?? []) if (a.family === 'IPv4') addresses.push({ iface, address: ipToInt(a.address) });
  }
  const routes: HostNetwork['routes'] = [];
  let table = '';
  try { table = readFileSync('/proc/net/route', 'utf8'); } catch { /* no procfs: addresses alone */ }
  for (const line of table.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || !foreign(f[0])) continue;
    const dest = procHex(f[1]);
    const mask = procHex(f[7]);
    const prefix = prefixOfMask(mask);
    routes.push({ iface: f[0], range: { first: dest, last: (dest | (~mask >>> 0)) >>> 0 }, prefix, gateway: procHex(f[2]) });
  }
  return { addresses, routes };
}

/**
 * Why a sandbox subnet would clash with the host's network, or undefined when it is free: an
 * address of the host inside it, a gateway inside it, or a route more specific than the pool
 * that covers it (another agent's sandbox, a bridge, a VPN). Routes as wide as the pool or wider
 * (a LAN, the default route) do not clash: the subnet's own, longer route wins for its addresses.
 */
export function subnetClash(subnet: Range, poolPrefix: number, host: HostNetwork): string | undefined {
  const a = host.addresses.find((x) => inRange(x.address, subnet));
  if (a) return `address of ${a.iface}`;
  const g = host.routes.find((r) => r.gateway !== 0 && inRange(r.gateway, subnet));
  if (g) return `gateway of a route on ${g.iface}`;
  const r = host.routes.find((x) => x.prefix > poolPrefix && overlaps(x.range, subnet));
  if (r) return `route on ${r.iface}`;
  return undefined;
}

/** Routes of the host, other than the default, that the whole pool lies inside or overlaps. */
export function widerRoutesOver(pool: Range, poolPrefix: number, host: HostNetwork): string[] {
  return host.routes.filter((r) => r.prefix > 0 && r.prefix <= poolPrefix && overlaps(r.range, pool)).map((r) => r.iface);
}
