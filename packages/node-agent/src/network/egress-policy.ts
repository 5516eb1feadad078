import { badRequest, intToIp, parseCidr } from '@svc/common';
import { EGRESS_DEFAULTS } from '@svc/contracts/egress';

/** What a sandbox may reach outside itself, in layer-3 terms. */
export interface EgressPolicy {
  allowInternetAccess: boolean;
  /** IPv4 CIDRs, always allowed (they win over denyOut and over allowInternetAccess=false). */
  allowOut: string[];
  /** IPv4 CIDRs, denied when internet access is otherwise allowed. */
  denyOut: string[];
  /** TCP ports sent to the egress proxy instead (the ports of its layer-7 rules), with their scheme. */
  steer: SteeredPort[];
  /** Its other TCP, where layer 3 allows it, goes to the egress proxy's tunnel listener (its SOCKS5 egressProxy). */
  tunnel?: boolean;
  /** Host names of allowOut (not wildcards): their learned addresses are allowed on any port. */
  allowOutHosts?: string[];
  /** Those addresses as /32s, learned at create and on a period (HostLearner). */
  learned?: string[];
}

interface SteeredPort { port: number; scheme: 'http' | 'https' }

/** What a create asks for unless it says otherwise. */
const DEFAULT_POLICY: EgressPolicy = { allowInternetAccess: true, allowOut: [], denyOut: [], steer: [] };

/**
 * What a warm-pool sandbox waits with until it is handed out: nothing leaves it. It runs its
 * template's files before any create asked for it, counted in no team's quota; with internet it
 * could send what it liked, and a connection it opened outlived the hand-out (found by a helper
 * reading the node agent as an attacker). The hand-out sets the create's policy (create.ts).
 */
export const WARM_POLICY: EgressPolicy = { allowInternetAccess: false, allowOut: [], denyOut: [], steer: [] };

/**
 * Whether `next` only lets through more than `prev` (an allowOut entry or host added, a denyOut
 * entry removed, internet access turned on), with the same ports steered to the egress proxy and
 * the same tunnel; learned addresses aside (they follow DNS, not the user). Anything else narrows,
 * and the sandbox's open outbound connections are forgotten (conntrack.ts).
 */
export function onlyWidens(prev: EgressPolicy, next: EgressPolicy): boolean {
  const within = (a: string[], b: string[]) => a.every((x) => b.includes(x));
  const steer = (p: EgressPolicy) => (p.steer ?? []).map((t) => `${t.port}/${t.scheme}`).sort().join(',');
  return (next.allowInternetAccess || !prev.allowInternetAccess) && within(prev.allowOut, next.allowOut) && within(next.denyOut, prev.denyOut)
    && within(prev.allowOutHosts ?? [], next.allowOutHosts ?? []) && steer(prev) === steer(next) && !prev.tunnel === !next.tunnel;
}

export function samePolicy(a: EgressPolicy, b: EgressPolicy): boolean {
  const same = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  const steer = (p: EgressPolicy) => (p.steer ?? []).map((t) => `${t.port}/${t.scheme}`);
  return a.allowInternetAccess === b.allowInternetAccess && same(a.allowOut, b.allowOut) && same(a.denyOut, b.denyOut) && same(steer(a), steer(b)) && !a.tunnel === !b.tunnel
    && same(a.allowOutHosts ?? [], b.allowOutHosts ?? []) && same(a.learned ?? [], b.learned ?? []);
}

export interface PolicyInput {
  allowInternetAccess: boolean;
  allowOut: string[];
  denyOut: string[];
  steer?: SteeredPort[];
  tunnel?: boolean;
}

/**
 * Turns the create request's lists into CIDRs this node enforces.
 * IPv6 entries are dropped: sandboxes have no IPv6 route at all. Domain names in allowOut are
 * dropped (fail closed: only the egress proxy can resolve and allow names); a domain in
 * denyOut is refused because this layer could not keep the promise.
 */
export function normalizePolicy(input: PolicyInput): { policy: EgressPolicy; ignored: string[] } {
  const ignored: string[] = [];
  const hosts: string[] = [];
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
        // A wildcard names no address to learn: only the egress proxy can allow it (by SNI or Host).
        if (entry.includes('*')) ignored.push(entry); else hosts.push(entry.toLowerCase().replace(/\.$/, ''));
      }
    }
    return [...new Set(out)];
  };
  return {
    policy: {
      allowInternetAccess: input.allowInternetAccess,
      allowOut: cidrs(input.allowOut, 'allowOut', true),
      denyOut: cidrs(input.denyOut, 'denyOut', false),
      steer: steeredPorts(input.steer ?? []),
      allowOutHosts: allowOutHosts(hosts),
      ...(input.tunnel ? { tunnel: true } : {}),
    },
    ignored,
  };
}

/** True when anything may leave the sandbox, so its traffic needs source NAT. */
export function reachesOutside(p: EgressPolicy): boolean {
  return p.allowInternetAccess || p.allowOut.length > 0 || (p.learned?.length ?? 0) > 0;
}

/** One scheme per port: the node steers by port alone, to the proxy's HTTP or HTTPS listener. */
function steeredPorts(list: unknown[]): SteeredPort[] {
  if (!Array.isArray(list) || list.length > 256) throw badRequest('network.steer must be a list of at most 256 {port, scheme}');
  const byPort = new Map<number, SteeredPort>();
  for (const t of list as SteeredPort[]) {
    if (!t || !Number.isInteger(t.port) || t.port < 1 || t.port > 65535 || (t.scheme !== 'http' && t.scheme !== 'https')) {
      throw badRequest(`network.steer: ${JSON.stringify(t)} is not {port: 1..65535, scheme: http|https}`);
    }
    const seen = byPort.get(t.port);
    if (seen && seen.scheme !== t.scheme) throw badRequest(`network.steer: port ${t.port} is steered as both http and https; a node steers by port, so one scheme per port across all hosts`);
    byPort.set(t.port, { port: t.port, scheme: t.scheme });
  }
  return [...byPort.values()].sort((a, b) => a.port - b.port);
}

function allowOutHosts(hosts: string[]): string[] {
  const unique = [...new Set(hosts)].sort();
  if (unique.length > EGRESS_DEFAULTS.maxAllowOutHosts) {
    throw badRequest(`network.allowOut names ${unique.length} host names; a sandbox may name at most ${EGRESS_DEFAULTS.maxAllowOutHosts} (their addresses are learned and allowed), or use a wildcard (*.example.com) or egress rules`);
  }
  return unique;
}
