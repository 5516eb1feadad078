import { badRequest } from '@svc/common';
import type { PlatformAddresses, SandboxEgressPolicy } from '@svc/contracts/egress';
import type { NetworkConfig } from '@svc/contracts/master';
import { placeholderRefs } from '@svc/contracts/secrets';
import { parseProxyAddress } from '@svc/contracts/egress-tunnel';
import type { SandboxContext } from './context.ts';
import { planEgress, type EgressPlan } from './egress-plan.ts';
import type { Row } from './repo.ts';

export async function pushEgress(c: SandboxContext, nodeId: string, sandboxId: string, address: string, plan: EgressPlan, teamId: string): Promise<void> {
  if (plan.policy) await c.d.egress.put(nodeId, { sandboxId, address, teamId, ...plan.policy });
}

/** In the background; remove logs what fails. */
export function dropEgress(c: SandboxContext, nodeId: string, sandboxId: string, plan: EgressPlan): void {
  if (plan.policy) void c.d.egress.remove(nodeId, sandboxId);
}

/** A sandbox's egressProxy may not point at the platform itself or into a sandbox pool (400), docs/egress.md "Bring your own proxy". */
export async function checkEgressProxy(c: SandboxContext, network: NetworkConfig): Promise<void> {
  const address = network.egressProxy?.address;
  if (!address || !c.d.endpoints) return;
  const { host, port } = parseProxyAddress(address, 'network.egressProxy.address');
  await c.d.endpoints.checkEndpoint(host, port, 'network.egressProxy');
}

/** Where the egress proxy never connects for a sandbox (MASTER_EGRESS_ROUTES.platformAddresses); none known without an endpoint check. */
export async function platformAddresses(c: SandboxContext): Promise<PlatformAddresses> {
  return c.d.endpoints ? c.d.endpoints.platformAddresses() : { endpoints: [], pools: [] };
}

/** The egress plan of a recorded sandbox. */
export function egressPlanOf(c: SandboxContext, row: Row): EgressPlan {
  try {
    return planEgress(JSON.parse(row.network) as NetworkConfig, row.allow_internet_access === null || Number(row.allow_internet_access) !== 0);
  } catch (err) {
    // Recorded before its rules were checked: no policy the proxy would take, so none (its requests are refused).
    c.d.logger.warn({ sandboxId: row.sandbox_id, err: (err as Error).message }, 'a recorded sandbox\'s network rules do not pass the checks');
    return { steer: [] };
  }
}

/** The policies the egress proxy of a node enforces: its running sandboxes that have one. */
export async function egressPolicies(c: SandboxContext, nodeId: string): Promise<SandboxEgressPolicy[]> {
  // Only running ones: a paused sandbox's address may be another's by now, and its resume sends its policy again.
  const rows = (await c.d.repo.listByNode(nodeId)).filter((r) => r.state === 'running' || r.state === 'pausing');
  const out: SandboxEgressPolicy[] = [];
  for (const row of rows) {
    const plan = egressPlanOf(c, row);
    if (plan.policy) out.push({ sandboxId: row.sandbox_id, address: row.address, teamId: row.team_id, ...plan.policy });
  }
  return out;
}

/**
 * Every `${e2b.secrets.NAME}` in the network rules names a secret of the team, and every
 * `${e2b.identity.tokens.NAME}` a token the sandbox registered: else 400 naming them, before
 * anything starts (docs/security.md). The egress proxy resolves them per request.
 */
export async function checkPlaceholders(c: SandboxContext, network: NetworkConfig, teamId: string, tokenNames: string[]): Promise<void> {
  if (network.rules === undefined) return;
  const refs = { secrets: new Set<string>(), tokens: new Set<string>() };
  for (const s of stringsIn(network.rules)) {
    const r = placeholderRefs(s);
    r.secrets.forEach((n) => refs.secrets.add(n));
    r.tokens.forEach((n) => refs.tokens.add(n));
  }
  const unknownTokens = [...refs.tokens].filter((n) => !tokenNames.includes(n));
  if (unknownTokens.length) {
    throw badRequest(`network rules use workload tokens that the sandbox does not register in iam.tokens: ${unknownTokens.join(', ')}`);
  }
  if (refs.secrets.size === 0) return;
  if (!c.d.secrets) throw badRequest('network rules use ${e2b.secrets.…} placeholders, and this master has no secrets vault');
  const missing = await c.d.secrets.missing(teamId, [...refs.secrets]);
  if (missing.length) throw badRequest(`network rules use secrets the team does not have: ${missing.join(', ')} (create them with Secret.create or POST /secrets)`);
}

/** Every string anywhere in a JSON value (the network rules, whatever shape they came in). */
function stringsIn(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v)) return v.flatMap(stringsIn);
  if (v && typeof v === 'object') return Object.values(v).flatMap(stringsIn);
  return [];
}
