import { checkEgressRules, checkHostPattern, EgressRuleError, type EgressFallback, type EgressTransform, type SandboxEgressPolicy } from '@svc/contracts/egress';
import { parseEgressProxy } from '@svc/contracts/egress-tunnel';
import { isIpv4, parseCidr } from './ipv4.ts';

/**
 * A policy as the admin API or the master hands it over, checked and normalized: an IPv4
 * address, rules through the contract's checks, fallback lists of IPv4 CIDRs (a bare address
 * is a /32), transforms with a host pattern and checked injects. Throws EgressRuleError with a
 * message for the caller.
 */
export function checkPolicy(input: unknown): SandboxEgressPolicy {
  if (!isObject(input)) throw new EgressRuleError('the policy must be an object {sandboxId, address, rules, fallback?, transforms?, tunnel?}');
  const { sandboxId, address } = input;
  if (typeof sandboxId !== 'string' || !sandboxId || sandboxId.length > 128) throw new EgressRuleError('sandboxId must be a string of 1 to 128 characters');
  if (typeof address !== 'string' || !isIpv4(address)) throw new EgressRuleError(`address must be an IPv4 address, not ${JSON.stringify(address)}`);
  const policy: SandboxEgressPolicy = { sandboxId, address, rules: checkEgressRules(input.rules ?? []) };
  if (input.teamId !== undefined && input.teamId !== null) {
    if (typeof input.teamId !== 'string' || !input.teamId || input.teamId.length > 128) throw new EgressRuleError('teamId must be a string of 1 to 128 characters');
    policy.teamId = input.teamId;
  }
  if (input.fallback !== undefined && input.fallback !== null) policy.fallback = checkFallback(input.fallback);
  const tunnel = parseEgressProxy(input.tunnel, 'tunnel');
  if (tunnel) policy.tunnel = tunnel;
  if (input.transforms !== undefined && input.transforms !== null) {
    const transforms = checkTransforms(input.transforms);
    if (transforms.length) policy.transforms = transforms;
  }
  return policy;
}

function checkFallback(raw: unknown): EgressFallback {
  if (!isObject(raw) || typeof raw.allowInternetAccess !== 'boolean') {
    throw new EgressRuleError('fallback must be an object {allowInternetAccess: boolean, allowOut: CIDR[], denyOut: CIDR[]}');
  }
  return { allowInternetAccess: raw.allowInternetAccess, allowOut: cidrList(raw.allowOut, 'allowOut'), denyOut: cidrList(raw.denyOut, 'denyOut') };
}

function checkTransforms(raw: unknown): EgressTransform[] {
  if (!Array.isArray(raw)) throw new EgressRuleError('transforms must be a list of {host, inject}');
  return raw.map((t, i) => {
    const where = `transforms[${i}]`;
    if (!isObject(t) || typeof t.host !== 'string') throw new EgressRuleError(`${where} must be an object {host, inject}`);
    const host = checkHostPattern(t.host, `${where}.host`);
    // The same checks as a rule's inject: header names, no framing headers, no line breaks.
    const [rule] = checkEgressRules([{ name: where, match: { host }, action: { allow: true, inject: t.inject ?? [] } }]);
    return { host, inject: rule.action.inject ?? [] };
  });
}

function cidrList(raw: unknown, field: string): string[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw new EgressRuleError(`fallback.${field} must be a list of IPv4 CIDRs`);
  return raw.map((x, i) => {
    if (typeof x !== 'string' || !parseCidr(x)) throw new EgressRuleError(`fallback.${field}[${i}] must be an IPv4 address or CIDR, not ${JSON.stringify(x)}`);
    return x.trim();
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
