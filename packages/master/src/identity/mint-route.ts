import type { FastifyInstance } from 'fastify';
import { notFound } from '@svc/common';
import { IDENTITY_ROUTES as R } from '@svc/contracts/identity';
import { serve } from '@svc/contracts/route-table';
import { requireEgressAdmin } from '../egress-admin-auth.ts';
import { guardedRoutes } from '../route-guard.ts';
import type { WorkloadIdentityIssuer } from './issuer.ts';

/** What minting needs to know of a sandbox: its team and the tokens it registered. */
export interface SandboxIdentities {
  /** undefined when no live sandbox has that id. */
  of(sandboxId: string): Promise<{ teamId: string; tokens: Record<string, { audience: string }> } | undefined>;
}

/**
 * The egress proxy asks here for the token a `${e2b.identity.tokens.NAME}` placeholder stands
 * for (docs/security.md, "Workload identity"); the signing keys never leave the master. The
 * token is checked before the body.
 */
export function registerMintRoute(app: FastifyInstance, issuer: Pick<WorkloadIdentityIssuer, 'mint'>, sandboxes: SandboxIdentities, egressAdminToken: string): void {
  guardedRoutes(app, (req) => requireEgressAdmin(req, egressAdminToken, 'mint workload tokens'), (scope) => serve(scope, R.mint, async (req) => {
    const { sandboxId, name } = req.body;
    const s = await sandboxes.of(sandboxId);
    if (!s) throw notFound(`sandbox ${sandboxId} not found`);
    const t = Object.hasOwn(s.tokens, name) ? s.tokens[name] : undefined;
    if (!t) throw notFound(`sandbox ${sandboxId} registered no workload token ${JSON.stringify(name)} in iam.tokens`);
    return issuer.mint({ teamId: s.teamId, sandboxId, audience: t.audience });
  }));
}
