import { badRequest } from '@svc/common';
import {
  checkEgressRules, checkHostPattern, EGRESS_DEFAULTS, EgressRuleError, REDACTED, redactRules, steeredTuples,
  type EgressInject, type EgressRule, type EgressScheme, type EgressTransform, type SandboxEgressPolicy,
} from '@svc/contracts/egress';
import { egressProxyInfo } from '@svc/contracts/egress-tunnel';
import type { NetworkConfig } from '@svc/contracts/master';

/** What a sandbox's network settings mean for the egress proxy (docs/egress.md, "How a policy is made"). */
export interface EgressPlan {
  /** The (port, scheme) pairs its node sends to the proxy; empty when the proxy is not in its path. */
  steer: Array<{ port: number; scheme: EgressScheme }>;
  /** What the proxy enforces for it; undefined when the proxy is not in its path. */
  policy?: Omit<SandboxEgressPolicy, 'sandboxId' | 'address'>;
  /** Its other TCP goes to the proxy's tunnel listener, on to its egressProxy (docs/egress.md "Bring your own proxy"). */
  tunnel?: boolean;
}

/** The network part of a node's create or update request for a sandbox with this plan. */
export function nodeNetwork(network: Pick<NetworkConfig, 'allowOut' | 'denyOut'>, plan: EgressPlan): { allowOut: string[]; denyOut: string[]; steer?: EgressPlan['steer']; tunnel?: boolean } {
  return { allowOut: network.allowOut ?? [], denyOut: network.denyOut ?? [], ...(plan.steer.length ? { steer: plan.steer } : {}), ...(plan.tunnel ? { tunnel: true } : {}) };
}

const CIDR_OR_IP = /^[\d.]+(\/\d+)?$/;

/**
 * Turns the create (or network update) settings into the proxy's policy:
 * - our rule list (`network.rules` as a list: docs/egress.md, "Rules") comes first, and what it
 *   leaves unmatched is denied;
 * - E2B's form: host names in allowOut become allow rules for those hosts; E2B's per-host header
 *   transforms inject into requests to hosts that allowOut names, or, for other hosts, into what
 *   the layer-3 lists allow (E2B: transforms do not grant access); a request no rule matched is
 *   decided by its upstream address against allowOut/denyOut, as layer 3 decides the rest.
 * Throws 400 on a rule that breaks the constraints of docs/egress.md, "Rules".
 */
export function planEgress(network: Pick<NetworkConfig, 'allowOut' | 'denyOut' | 'rules' | 'egressProxy'>, allowInternetAccess: boolean): EgressPlan {
  const specForm = Array.isArray(network.rules);
  let specRules: EgressRule[] = [];
  let transforms: EgressTransform[] = [];
  try {
    if (specForm) specRules = checkEgressRules(network.rules);
    else if (network.rules !== undefined) transforms = e2bTransforms(network.rules);
  } catch (err) {
    if (err instanceof EgressRuleError) throw badRequest(err.message);
    throw err;
  }
  const domains: string[] = [];
  for (const [i, entry] of network.allowOut.entries()) {
    const v = entry.trim();
    if (CIDR_OR_IP.test(v) || v.includes(':')) continue;
    try {
      domains.push(checkHostPattern(v, `network.allowOut[${i}]`));
    } catch (err) {
      throw badRequest((err as Error).message);
    }
  }
  const named = new Set(domains.filter((d) => !d.startsWith('*.')));
  if (named.size > EGRESS_DEFAULTS.maxAllowOutHosts) {
    throw badRequest(`network.allowOut names ${named.size} host names; a sandbox may name at most ${EGRESS_DEFAULTS.maxAllowOutHosts} (their addresses are learned and allowed), or use a wildcard (*.example.com) or egress rules`);
  }
  const covered = transforms.filter((t) => domains.some((d) => covers(d, t.host)));
  const loose = transforms.filter((t) => !covered.includes(t));
  const rules: EgressRule[] = [
    ...specRules,
    ...covered.map((t) => ({ name: `transform ${t.host}`, match: { host: t.host }, action: { allow: true, inject: t.inject } })),
    ...domains.map((d) => ({ name: `allowOut ${d}`, match: { host: d }, action: { allow: true } })),
  ];
  const tunnel = network.egressProxy;
  if (rules.length === 0 && loose.length === 0 && !tunnel) return { steer: [] };
  const steer = steeredTuples(rules);
  if (loose.length > 0) {
    for (const t of [{ port: 80, scheme: 'http' as const }, { port: 443, scheme: 'https' as const }]) {
      if (!steer.some((s) => s.port === t.port && s.scheme === t.scheme)) steer.push(t);
    }
  }
  const schemes = new Map<number, EgressScheme>();
  for (const t of steer) {
    const seen = schemes.get(t.port);
    if (seen && seen !== t.scheme) throw badRequest(`network.rules: port ${t.port} is used as both http and https; a sandbox's port goes to one listener of the egress proxy, so one scheme per port across all hosts`);
    schemes.set(t.port, t.scheme);
  }
  const ipv4 = (list: string[]) => list.map((e) => e.trim()).filter((e) => CIDR_OR_IP.test(e)).map((e) => e.includes('/') ? e : `${e}/32`);
  return {
    steer: steer.sort((a, b) => a.port - b.port),
    policy: {
      rules,
      ...(specForm ? {} : { fallback: { allowInternetAccess, allowOut: ipv4(network.allowOut), denyOut: ipv4(network.denyOut) } }),
      ...(loose.length ? { transforms: loose } : {}),
      ...(tunnel ? { tunnel } : {}),
    },
    ...(tunnel ? { tunnel: true } : {}),
  };
}

/** E2B's `{host: [{transform: {headers}}]}`: exact hosts first, then wildcards by longest suffix (E2B's precedence). */
function e2bTransforms(raw: unknown): EgressTransform[] {
  if (typeof raw !== 'object' || raw === null) throw new EgressRuleError('network.rules must be a list of rules or E2B\'s {host: [{transform: {headers}}]}');
  const out: EgressTransform[] = [];
  for (const [key, list] of Object.entries(raw as Record<string, unknown>)) {
    const where = `network.rules[${JSON.stringify(key)}]`;
    if (key.trim() === '*') throw new EgressRuleError(`${where}: a bare "*" is not a host; use a domain or "*.domain"`);
    const host = checkHostPattern(key, where);
    if (!Array.isArray(list)) throw new EgressRuleError(`${where} must be a list of {transform: {headers}}`);
    const inject: EgressInject[] = [];
    for (const [j, rule] of list.entries()) {
      const headers = (rule as { transform?: { headers?: unknown } })?.transform?.headers;
      if (headers === undefined) continue;
      if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) throw new EgressRuleError(`${where}[${j}].transform.headers must be an object of header name to value`);
      for (const [header, value] of Object.entries(headers)) inject.push({ header, secret: value as string });
    }
    if (inject.length === 0) continue;
    // The same checks as a rule's inject (header names, no line breaks, no framing headers: docs/egress.md, "Rules").
    checkEgressRules([{ name: 'transform', match: { host }, action: { allow: true, inject } }]);
    out.push({ host, inject });
  }
  const rank = (h: string) => h.startsWith('*.') ? 1_000 - h.length : 0;
  return out.sort((a, b) => rank(a.host) - rank(b.host));
}

/** Whether an allowOut pattern admits every host the transform's pattern names. */
function covers(allowed: string, host: string): boolean {
  if (allowed === host) return true;
  if (!allowed.startsWith('*.')) return false;
  const suffix = allowed.slice(1);
  return (host.startsWith('*.') ? host.slice(1) : host).endsWith(suffix);
}

/** The network settings as reads show them: every injected value replaced by REDACTED. */
export function redactNetwork(withProxy: NetworkConfig): NetworkConfig {
  // E2B's reads never return the proxy's password (SandboxEgressProxyInfo).
  const n: NetworkConfig = withProxy.egressProxy ? { ...withProxy, egressProxy: egressProxyInfo(withProxy.egressProxy) } : withProxy;
  if (n.rules === undefined) return n;
  if (Array.isArray(n.rules)) {
    try {
      return { ...n, rules: redactRules(checkEgressRules(n.rules)) };
    } catch {
      // Stored before the rules were checked: show no part of them rather than a secret.
      return { ...n, rules: [] };
    }
  }
  const rules: Record<string, unknown> = {};
  for (const [host, list] of Object.entries(n.rules as Record<string, unknown>)) {
    rules[host] = Array.isArray(list) ? list.map((r) => {
      const headers = (r as { transform?: { headers?: Record<string, unknown> } })?.transform?.headers;
      return headers ? { transform: { headers: Object.fromEntries(Object.keys(headers).map((k) => [k, REDACTED])) } } : r;
    }) : [];
  }
  return { ...n, rules };
}
