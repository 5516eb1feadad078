/** IPv4 addresses and CIDR blocks, as the policies name them (arithmetic: @svc/common's ipv4). */
import { canonicalAddress, ipToInt, isIpv4, parseCidr as parseCommonCidr } from '@svc/common';

export { isIpv4 };

/**
 * The socket's remote address as the policies name it: an IPv4-mapped IPv6 address as its IPv4
 * address (common's canonicalAddress, the one normaliser of the platform's addresses).
 */
export function plainIpv4(address: string | undefined): string {
  return address ? canonicalAddress(address) : '';
}

export interface Cidr {
  text: string;
  base: number;
  prefix: number;
}

/** `a.b.c.d/n` or a bare address (a /32); undefined when it is neither. */
export function parseCidr(text: string): Cidr | undefined {
  const [ip] = text.trim().split('/');
  if (!isIpv4(ip)) return undefined;
  try {
    return { text: text.trim(), ...parseCommonCidr(text) };
  } catch {
    // Deliberately quiet: undefined is this function's answer for text that is no CIDR, and the
    // policy check (policy-check.ts) turns it into the 400 that names the entry.
    return undefined;
  }
}

/**
 * Each list's CIDRs parsed once: a policy's lists are built by the policy check and replaced,
 * never changed in place, when the policy changes, so the list itself is the key (and a
 * replaced policy's entry goes with it).
 */
const parsedLists = new WeakMap<readonly string[], Cidr[]>();

function parsed(list: readonly string[]): Cidr[] {
  let cidrs = parsedLists.get(list);
  if (!cidrs) {
    cidrs = list.map(parseCidr).filter((c): c is Cidr => c !== undefined);
    parsedLists.set(list, cidrs);
  }
  return cidrs;
}

/** The first CIDR of the list that holds the address. */
export function firstContaining(list: readonly string[], ip: string): string | undefined {
  if (!isIpv4(ip)) return undefined;
  const n = ipToInt(ip);
  // >>> keeps the comparison unsigned for addresses at or above 128.0.0.0
  return parsed(list).find((c) => c.prefix === 0 || n >>> (32 - c.prefix) === c.base >>> (32 - c.prefix))?.text;
}

/** The first CIDR of the list that holds every address (a /0). */
export function firstHoldingAll(list: readonly string[]): string | undefined {
  return parsed(list).find((c) => c.prefix === 0)?.text;
}
