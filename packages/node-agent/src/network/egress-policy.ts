import { badRequest } from '@svc/common';
import { parseCidr, intToIp } from './ipv4.ts';

/** What a sandbox may reach outside itself, in layer-3 terms. */
export interface EgressPolicy {
  allowInternetAccess: boolean;
  /** IPv4 CIDRs, always allowed (they win over denyOut and over allowInternetAccess=false). */
  allowOut: string[];
  /** IPv4 CIDRs, denied when internet access is otherwise allowed. */
  denyOut: string[];
}

/** Warm sandboxes wait with no way out until they are handed out. */
export const DENY_ALL: EgressPolicy = { allowInternetAccess: false, allowOut: [], denyOut: [] };
/** What a create asks for unless it says otherwise. */
export const DEFAULT_POLICY: EgressPolicy = { allowInternetAccess: true, allowOut: [], denyOut: [] };

export function samePolicy(a: EgressPolicy, b: EgressPolicy): boolean {
  const same = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return a.allowInternetAccess === b.allowInternetAccess && same(a.allowOut, b.allowOut) && same(a.denyOut, b.denyOut);
}

export interface PolicyInput {
  allowInternetAccess: boolean;
  allowOut: string[];
  denyOut: string[];
}

/**
 * Turns the create request's lists into CIDRs this node enforces.
 * IPv6 entries are dropped: sandboxes have no IPv6 route at all. Domain names in allowOut are
 * dropped (fail closed: only the egress proxy can resolve and allow names); a domain in
 * denyOut is refused because this layer could not keep the promise.
 */
export function normalizePolicy(input: PolicyInput): { policy: EgressPolicy; ignored: string[] } {
  const ignored: string[] = [];
  const cidrs = (list: string[], field: string, domainsAllowed: boolean) => {
    const out: string[] = [];
    for (const raw of list) {
      const entry = String(raw).trim();
      if (entry.includes(':')) { ignored.push(entry); continue; }
      try {
        const { base, prefix } = parseCidr(entry);
        out.push(`${intToIp(base)}/${prefix}`);
      } catch {
        if (/^\d+(\.\d+){0,3}(\/\d+)?$/.test(entry) || !/^[A-Za-z0-9*]([A-Za-z0-9.*-]*[A-Za-z0-9])?$/.test(entry)) {
          throw badRequest(`network.${field}: ${JSON.stringify(entry)} is not an IPv4 address or CIDR`);
        }
        if (!domainsAllowed) throw badRequest(`network.${field}: ${JSON.stringify(entry)} is a domain; this node enforces ${field} by IPv4 address or CIDR only`);
        ignored.push(entry);
      }
    }
    return [...new Set(out)];
  };
  return {
    policy: {
      allowInternetAccess: input.allowInternetAccess,
      allowOut: cidrs(input.allowOut, 'allowOut', true),
      denyOut: cidrs(input.denyOut, 'denyOut', false),
    },
    ignored,
  };
}

/** True when anything may leave the sandbox, so its traffic needs source NAT. */
export function reachesOutside(p: EgressPolicy): boolean {
  return p.allowInternetAccess || p.allowOut.length > 0;
}
