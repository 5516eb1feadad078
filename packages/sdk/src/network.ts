/**
 * Builds the `network` part of a create request: resolves e2b-style selector callbacks,
 * translates e2b's per-host header transforms into svc egress inject rules, and checks
 * the rule constraints of docs/api.md (egress rules) before the server re-checks them.
 */
import { checkEgressRules, EgressRuleError } from '@svc/contracts/egress';
import { InvalidArgumentError } from './errors.ts';
import type { EgressRule, SandboxNetworkOpts, SandboxNetworkRule, SandboxNetworkRules, SandboxNetworkSelector } from './types.ts';
import type { WireNetwork } from './wire.ts';

export const ALL_TRAFFIC = '0.0.0.0/0';

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
  if (opts.egressProxy !== undefined) out.egressProxy = { ...opts.egressProxy };
  if (Array.isArray(opts.rules)) {
    if (opts.rules.length > 0) out.rules = validateEgressRules(opts.rules);
  } else if (hostRules.size > 0) {
    out.rules = wireHostRules(hostRules);
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

/**
 * E2B's host → rules map, sent as E2B sends it: the server applies E2B's meaning (the headers are
 * injected into requests that the allow lists let through; they grant nothing themselves).
 */
function wireHostRules(hostRules: Map<string, SandboxNetworkRule[]>): Record<string, Array<{ transform: { headers: Record<string, string> } }>> {
  const out: Record<string, Array<{ transform: { headers: Record<string, string> } }>> = {};
  for (const [host, rules] of hostRules) {
    if (host.trim() === '*') throw new InvalidArgumentError('network.rules: a bare "*" is not a host; use a domain or "*.domain"');
    out[host.toLowerCase()] = rules.map((r) => ({ transform: { headers: { ...(r.transform?.headers ?? {}) } } }));
  }
  return out;
}

/** The constraints of docs/egress.md "Rules", the same checks the server runs (@svc/contracts/egress). */
function validateEgressRules(rules: EgressRule[]): EgressRule[] {
  try {
    return checkEgressRules(rules);
  } catch (err) {
    if (err instanceof EgressRuleError) throw new InvalidArgumentError(err.message);
    throw err;
  }
}
