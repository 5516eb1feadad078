import { networkInterfaces } from 'node:os';

/**
 * This host's own addresses, every interface's, IPv4 and IPv6 (lower-case), read now: what a
 * component listening on every address answers on, and what the platform never connects to for
 * a user (the master's checks, the egress proxy's guard, the template center's registry hops).
 */
export function hostAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address.toLowerCase()));
}
