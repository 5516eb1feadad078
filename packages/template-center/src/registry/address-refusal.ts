import { isIP } from 'node:net';
import { canonicalAddress, embeddedIpv4, hostAddresses, inIpCidr, parseIpCidr } from '@svc/common';

/** Why an address is no place to send a pull for a registry the operator did not name. */
export interface AddressRefusal {
  /** The address in its one written form (canonicalAddress), or the IPv4 address it carries. */
  address: string;
  /** "is loopback", "is private (RFC 1918)", ... */
  reason: string;
  /** It reaches the template center's own host (loopback, this host, link-local, an own address). */
  onHost: boolean;
}

const cidrs = (list: Array<[string, string]>) => list.map(([cidr, reason]) => ({ cidr: parseIpCidr(cidr), reason }));

/** The host itself, by any of these: the services beside the template center (master, node agent, database). */
const HOST = cidrs([
  ['127.0.0.0/8', 'is loopback'],
  ['0.0.0.0/8', 'means this host'],
  // Cloud metadata (169.254.169.254) answers here with the machine's credentials.
  ['169.254.0.0/16', 'is link-local'],
  ['::1/128', 'is loopback'],
  ['::/128', 'means this host'],
  ['fe80::/10', 'is link-local'],
]);

/**
 * Networks that are no registry's on the internet: the operator's own (the platform's
 * components, the database, other teams' sandboxes, a cloud's services such as Alibaba's
 * metadata at 100.100.100.200). A team naming one had the template center send registry-shaped
 * GETs there and read the answers back in its build's errors (found by a helper reading the
 * template center as an attacker).
 */
const PRIVATE = cidrs([
  ['10.0.0.0/8', 'is private (RFC 1918)'],
  ['172.16.0.0/12', 'is private (RFC 1918)'],
  ['192.168.0.0/16', 'is private (RFC 1918)'],
  ['100.64.0.0/10', 'is shared address space (RFC 6598)'],
  ['198.18.0.0/15', 'is a benchmarking network (RFC 2544)'],
  ['224.0.0.0/4', 'is multicast'],
  ['240.0.0.0/4', 'is reserved'],
  ['fc00::/7', 'is a unique local address (private, RFC 4193)'],
  ['fec0::/10', 'is site-local (private)'],
  ['ff00::/8', 'is multicast'],
]);

/**
 * Why the template center may not connect to `raw` for a registry the operator did not name
 * (template_center.host_registries), or undefined. IPv6 forms that carry an IPv4 address (mapped,
 * compatible, NAT64, 6to4) are judged by that address: `[64:ff9b::a00:5]` reaches 10.0.0.5
 * through a NAT64 gateway.
 */
export function addressRefusal(raw: string): AddressRefusal | undefined {
  const a = canonicalAddress(raw);
  if (isIP(a) === 0) return undefined; // a name: its addresses are judged, once resolved
  const embedded = embeddedIpv4(a);
  const why = refusal(embedded ?? a);
  if (!why || !embedded) return why && { address: a, ...why };
  return { address: a, reason: `carries ${embedded}, which ${why.reason}`, onHost: why.onHost };
}

function refusal(a: string): Omit<AddressRefusal, 'address'> | undefined {
  const host = HOST.find((c) => inIpCidr(a, c.cidr))?.reason;
  if (host) return { reason: host, onHost: true };
  if (hostAddresses().some((h) => canonicalAddress(h) === a)) return { reason: 'is an address of this host', onHost: true };
  const other = PRIVATE.find((c) => inIpCidr(a, c.cidr))?.reason;
  return other === undefined ? undefined : { reason: other, onHost: false };
}
