import type { FastifyInstance } from 'fastify';
import { badRequest, notFound } from '@svc/common';
import { IDENTITY_MINT_PATH, type MintedWorkloadToken } from '@svc/contracts/identity';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import type { WorkloadIdentityIssuer } from './issuer.ts';

/** What minting needs to know of a sandbox: its team and the tokens it registered. */
export interface SandboxIdentities {
  /** undefined when no live sandbox has that id. */
  of(sandboxId: string): Promise<{ teamId: string; tokens: Record<string, { audience: string }> } | undefined>;
}

/**
 * The egress proxy asks here for the token a `${e2b.identity.tokens.NAME}` placeholder stands
 * for (docs/security.md, "Workload identity"); the signing keys never leave the master.
 */
export function registerMintRoute(app: FastifyInstance, issuer: Pick<WorkloadIdentityIssuer, 'mint'>, sandboxes: SandboxIdentities, egressAdminToken: string): void {
  app.post<{ Body: unknown }>(IDENTITY_MINT_PATH, async (req): Promise<MintedWorkloadToken> => {
    requireEgressAdmin(req, egressAdminToken, 'mint workload tokens');
    const b = req.body as { sandboxId?: unknown; name?: unknown } | undefined;
    if (!b || typeof b.sandboxId !== 'string' || typeof b.name !== 'string') throw badRequest('the body must be {"sandboxId": ..., "name": ...}');
    const s = await sandboxes.of(b.sandboxId);
    if (!s) throw notFound(`sandbox ${b.sandboxId} not found`);
    const t = Object.hasOwn(s.tokens, b.name) ? s.tokens[b.name] : undefined;
    if (!t) throw notFound(`sandbox ${b.sandboxId} registered no workload token ${JSON.stringify(b.name)} in iam.tokens`);
    return issuer.mint({ teamId: s.teamId, sandboxId: b.sandboxId, audience: t.audience });
  });
}
