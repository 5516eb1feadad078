/**
 * Builds the `network` part of a create request: resolves e2b-style selector callbacks,
 * translates e2b's per-host header transforms into svc egress inject rules, and checks
 * the rule constraints of docs/api.md (egress rules) before the server re-checks them.
 */
import { InvalidArgumentError } from './errors.ts';
import type { EgressRule, SandboxNetworkOpts, SandboxNetworkRule, SandboxNetworkRules, SandboxNetworkSelector } from './types.ts';
import type { WireNetwork } from './wire.ts';

export const ALL_TRAFFIC = '0.0.0.0/0';
const MAX_PORT_SCHEME_TUPLES_PER_HOST = 8;

export function buildNetwork(opts: SandboxNetworkOpts | undefined): WireNetwork | undefined {
  if (!opts) return undefined;
  const hostRules = hostRuleMap(opts.rules);
  const ctx = { allTraffic: ALL_TRAFFIC, rules: hostRules };
  const out: WireNetwork = {};
  const allowOut = resolveSelector(opts.allowOut, ctx);
  const denyOut = resolveSelector(opts.denyOut, ctx);
  if (allowOut) out.allowOut = allowOut;
  if (denyOut) out.denyOut = denyOut;
  if (opts.allowPublicTraffic !== undefined) out.allowPublicTraffic = opts.allowPublicTraffic;
  if (opts.maskRequestHost !== undefined) out.maskRequestHost = opts.maskRequestHost;
  const rules = Array.isArray(opts.rules) ? opts.rules : translateHostRules(hostRules);
  if (rules.length > 0) {
    validateEgressRules(rules);
    out.rules = rules;
  }
  return out;
}

function resolveSelector(
  sel: SandboxNetworkSelector | undefined,
  ctx: { allTraffic: string; rules: Map<string, SandboxNetworkRule[]> },
): string[] | undefined {
  if (sel === undefined) return undefined;
  return typeof sel === 'function' ? sel(ctx) : sel;
}

function hostRuleMap(rules: SandboxNetworkRules | undefined): Map<string, SandboxNetworkRule[]> {
  if (!rules || Array.isArray(rules)) return new Map();
  return rules instanceof Map ? new Map(rules) : new Map(Object.entries(rules));
}

/** One allow rule per host carrying its headers as injected secrets. */
function translateHostRules(hostRules: Map<string, SandboxNetworkRule[]>): EgressRule[] {
  const out: EgressRule[] = [];
  for (const [host, rules] of hostRules) {
    const inject = rules.flatMap((r) => Object.entries(r.transform?.headers ?? {}).map(([header, secret]) => ({ header, secret })));
    if (inject.length === 0) continue;
    out.push({ name: `transform-${host}`, match: { host }, action: { allow: true, inject } });
  }
  return out;
}

export function validateEgressRules(rules: EgressRule[]): void {
  const schemeOf = new Map<string, string>();
  const tuplesOf = new Map<string, Set<string>>();
  rules.forEach((rule, i) => {
    const where = `network.rules[${i}]${rule.name ? ` (${rule.name})` : ''}`;
    if (!rule.action || typeof rule.action.allow !== 'boolean') throw new InvalidArgumentError(`${where}: action.allow must be a boolean`);
    const m = rule.match ?? {};
    if (m.scheme !== undefined && m.scheme.toLowerCase() !== 'http' && m.scheme.toLowerCase() !== 'https') {
      throw new InvalidArgumentError(`${where}: scheme must be http or https`);
    }
    if (m.port !== undefined) {
      if (!Number.isInteger(m.port) || m.port < 1 || m.port > 65535) throw new InvalidArgumentError(`${where}: port must be 1 to 65535`);
      if (!m.scheme) throw new InvalidArgumentError(`${where}: port requires scheme`);
    }
    for (const field of ['host', 'sni'] as const) {
      if (m[field]?.includes('/')) throw new InvalidArgumentError(`${where}: ${field} must be a domain name or a single IP, not a CIDR`);
    }
    if (m.path !== undefined && m.path.indexOf('*') !== -1 && m.path.indexOf('*') !== m.path.length - 1) {
      throw new InvalidArgumentError(`${where}: path may only end with a single '*'`);
    }
    const host = m.host?.toLowerCase();
    if (!host) return;
    const scheme = m.scheme?.toLowerCase();
    const ports = m.port !== undefined ? [m.port] : scheme ? [scheme === 'https' ? 443 : 80] : [80, 443];
    for (const port of ports) {
      const s = scheme ?? (port === 443 ? 'https' : 'http');
      const key = `${host}:${port}`;
      const seen = schemeOf.get(key);
      if (scheme && seen && seen !== scheme) throw new InvalidArgumentError(`${where}: rules for ${key} disagree on scheme (${seen} and ${scheme})`);
      if (scheme) schemeOf.set(key, scheme);
      const tuples = tuplesOf.get(host) ?? new Set<string>();
      tuples.add(`${port}/${s}`);
      tuplesOf.set(host, tuples);
      if (tuples.size > MAX_PORT_SCHEME_TUPLES_PER_HOST) {
        throw new InvalidArgumentError(`${where}: more than ${MAX_PORT_SCHEME_TUPLES_PER_HOST} (port, scheme) pairs for host ${host}`);
      }
    }
  });
}
