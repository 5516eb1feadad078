import type { EgressFallback, EgressRule, EgressScheme, EgressTransform, SandboxEgressPolicy } from '@svc/contracts/egress';
import { hostMatches } from './host-match.ts';
import { firstContaining, firstHoldingAll } from './ipv4.ts';
import { denyRulePath, rulePath, withoutTrailingSlash } from './request-path.ts';

/** What the proxy knows of a request when it decides, before any upstream contact. */
export interface RequestFacts {
  scheme: EgressScheme;
  port: number;
  /** The TLS server name; absent on HTTP and on a ClientHello without one. */
  sni?: string;
  /** The Host header (or absolute-form URL host) without its port. */
  host: string;
  method: string;
  /** The path and query as forwarded (request-path.ts); the rules see runs of `/` in it as one. */
  path: string;
  /**
   * A tunnel whose bytes the proxy does not read (CONNECT): it may carry any SNI, method and path,
   * so a deny rule that names a host and whose scheme, port and host match refuses it whatever
   * those name; one naming an SNI but no host is compared with the CONNECT host (ruleMatches).
   */
  opaque?: boolean;
}

/**
 * How a deny rule held for a tunnel (RequestFacts.opaque), for the refusal to say why
 * (connect-refusal.ts): 'host', it names the tunnel's host; 'sni', it names no host but an SNI,
 * compared with the tunnel's host; 'as_sent', it names neither and matched the CONNECT as it is.
 */
export type TunnelDenial = 'host' | 'sni' | 'as_sent';

export type Decision =
  | { verdict: 'allow'; rule: EgressRule }
  /** `tunnel`: the request was a tunnel (facts.opaque), and how the rule held for it. */
  | { verdict: 'deny'; rule: EgressRule; reason: 'deny_rule' | 'malformed_rule'; tunnel?: TunnelDenial }
  /** No rule matched and the policy has no layer-3 fallback: the default deny of docs/egress.md "Rules". */
  | { verdict: 'default_deny' }
  /** No rule matched: the upstream's address decides (E2B's allowOut / denyOut / allowInternetAccess). */
  | { verdict: 'by_address'; fallback: EgressFallback };

export const DEFAULT_PORT: Record<EgressScheme, number> = { http: 80, https: 443 };

/** First matching rule wins (docs/egress.md "Rules"); a layer-3 fallback decides by address (docs/egress.md "E2B's network options"). */
export function decide(policy: SandboxEgressPolicy, facts: RequestFacts): Decision {
  // `//admin` is `/admin` to many upstreams: a deny rule for `/admin` must hold for it too.
  const paths = new RulePaths(rulePath(facts.path));
  for (const rule of policy.rules) {
    if (!ruleMatches(rule, facts, paths)) continue;
    if (!rule.action.allow) {
      // A deny rule that injects is a configuration error that the checks refuse; should one
      // arrive anyway, it still denies, and its inject goes nowhere.
      const malformed = (rule.action.inject?.length ?? 0) > 0;
      const reason = malformed ? 'malformed_rule' : 'deny_rule';
      return facts.opaque ? { verdict: 'deny', rule, reason, tunnel: tunnelDenial(rule) } : { verdict: 'deny', rule, reason };
    }
    return { verdict: 'allow', rule };
  }
  return policy.fallback ? { verdict: 'by_address', fallback: policy.fallback } : { verdict: 'default_deny' };
}

/** The request's path as allow rules see it, and (made at the first deny rule with a path) as deny rules do. */
class RulePaths {
  private forDeny: string | undefined;
  constructor(readonly exact: string) {}
  get loose(): string { return (this.forDeny ??= denyRulePath(this.exact)); }
}

function ruleMatches(rule: EgressRule, facts: RequestFacts, paths: RulePaths): boolean {
  const m = rule.match;
  if (m.scheme !== undefined && m.scheme.toLowerCase() !== facts.scheme) return false;
  if (!portMatches(rule, facts)) return false;
  if (m.host !== undefined && !hostMatches(m.host, facts.host)) return false;
  // A tunnel's SNI, methods and paths are not seen: a CONNECT (method CONNECT, no path) slipped
  // past a deny rule for DELETE or /admin* to a later host-wide allow, then sent exactly those
  // inside. So a deny rule that names the tunnel's host holds for it whatever else it names.
  // Only one that names a host: on 2026-12-01 this held for every deny rule, and one for
  // `method: [DELETE]` (or an SNI elsewhere) ahead of an allow-all refused every CONNECT.
  if (facts.opaque && !rule.action.allow) {
    const how = tunnelDenial(rule);
    // Scheme, port and host matched above.
    if (how === 'host') return true;
    // The tunnel's SNI is unknown at CONNECT time; the CONNECT host is taken as it, so a deny
    // rule naming only an SNI refuses a tunnel to that host and no other (docs/egress.md).
    if (how === 'sni') return hostMatches(m.sni!, facts.host);
    // No host or SNI: judged on what the CONNECT is (method CONNECT, empty path), so a rule for
    // DELETE or /admin* does not refuse tunnels to every host, and an unconditional one still does.
  }
  if (m.sni !== undefined && !sniHolds(m.sni, rule.action.allow, facts)) return false;
  if (m.method !== undefined) {
    const method = facts.method.toUpperCase();
    if (!m.method.some((x) => x.toUpperCase() === method)) return false;
  }
  if (m.path !== undefined) {
    // A deny rule compares leniently (request-path.ts denyRulePath), so that /ADMIN, /admin/ or
    // /admin;x cannot pass one for /admin that an upstream serves the same; allow rules exactly.
    if (rule.action.allow ? !pathMatches(m.path, paths.exact) : !denyPathMatches(m.path, paths.loose)) return false;
  }
  return true;
}

/**
 * Whether a rule's `sni` holds. An allow rule needs the ClientHello's name (none sent: no match,
 * so it fails closed). A deny rule holds on the SNI or on the Host: the proxy connects to the
 * Host, so a client that left SNI out, or sent an allowed one, still reached the host a deny
 * rule for `sni: evil.test` meant to refuse (docs/egress.md, "Rules").
 */
function sniHolds(pattern: string, allow: boolean, facts: RequestFacts): boolean {
  if (facts.sni !== undefined && hostMatches(pattern, facts.sni)) return true;
  return !allow && hostMatches(pattern, facts.host);
}

/** How a deny rule is held against a tunnel: one place for ruleMatches and the refusal's wording. */
function tunnelDenial(rule: EgressRule): TunnelDenial {
  if (rule.match.host !== undefined) return 'host';
  return rule.match.sni !== undefined ? 'sni' : 'as_sent';
}

/** Deny patterns read as denyRulePath reads paths, once per pattern (this runs on every request). */
const denyPatterns = new Map<string, string>();
const MAX_DENY_PATTERNS = 10_000;

/** pathMatches for a deny rule: both sides read by denyRulePath, and for an exact pattern a trailing `/` ignored. */
function denyPathMatches(pattern: string, looseUri: string): boolean {
  let loose = denyPatterns.get(pattern);
  if (loose === undefined) {
    if (denyPatterns.size >= MAX_DENY_PATTERNS) denyPatterns.clear();
    loose = pattern.endsWith('*') ? `${denyRulePath(pattern.slice(0, -1))}*` : withoutTrailingSlash(denyRulePath(pattern));
    denyPatterns.set(pattern, loose);
  }
  return loose.endsWith('*') ? pathMatches(loose, looseUri) : pathMatches(loose, withoutTrailingSlash(looseUri));
}

/**
 * A rule with a port needs that port. Without one, an allow rule covers only its scheme's
 * default port (both defaults when it names no scheme), while a deny rule covers any port.
 */
function portMatches(rule: EgressRule, facts: RequestFacts): boolean {
  if (rule.match.port !== undefined) return rule.match.port === facts.port;
  if (!rule.action.allow) return true;
  return facts.port === DEFAULT_PORT[facts.scheme];
}

export function pathMatches(pattern: string, uri: string): boolean {
  if (pattern.endsWith('*')) return uri.startsWith(pattern.slice(0, -1));
  // An exact pattern without a query is the path whatever the query: a deny rule for `/admin`
  // let `/admin?x` through before 2026-11-30.
  if (!pattern.includes('?')) {
    const q = uri.indexOf('?');
    return (q < 0 ? uri : uri.slice(0, q)) === pattern;
  }
  return uri === pattern;
}

export interface AddressVerdict {
  allow: boolean;
  /** Which list or setting decided, for the audit log and the 403's message. */
  why: string;
}

/** The layer-3 fallback on the upstream's resolved IPv4: allowOut, then denyOut, then allowInternetAccess. */
export function decideByAddress(fallback: EgressFallback, ip: string): AddressVerdict {
  const allowed = firstContaining(fallback.allowOut, ip);
  if (allowed) return { allow: true, why: `${ip} is in allow_out ${allowed}` };
  const denied = firstContaining(fallback.denyOut, ip);
  if (denied) return { allow: false, why: `${ip} is in deny_out ${denied}` };
  return fallback.allowInternetAccess
    ? { allow: true, why: 'internet access is allowed' }
    : { allow: false, why: `${ip} is in no allow_out entry and internet access is off` };
}

/**
 * Why the fallback can allow no address at all (no allowOut entry, and internet access off or
 * a denyOut entry holding every address); undefined when some address could pass. Such a request
 * is denied without resolving its Host: a lookup the sandbox chose the name of holds a thread of
 * the resolver's pool (dns-cache.ts) for nothing.
 */
export function fallbackAllowsNothing(fallback: EgressFallback): string | undefined {
  if (fallback.allowOut.length > 0) return undefined;
  if (!fallback.allowInternetAccess) return 'allow_out is empty and internet access is off';
  const all = firstHoldingAll(fallback.denyOut);
  return all === undefined ? undefined : `allow_out is empty and deny_out ${all} holds every address`;
}

/**
 * E2B's per-host transform for a request the fallback allowed: the first whose host pattern
 * matches (the master orders them exact hosts first, then wildcards by longest suffix).
 */
export function transformFor(policy: SandboxEgressPolicy, host: string): EgressTransform | undefined {
  return policy.transforms?.find((t) => hostMatches(t.host, host));
}
