import type { FastifyInstance } from 'fastify';
import { IDENTITY_ROUTES as R } from '@svc/contracts/identity';
import { serve } from '@svc/contracts/route-table';
import type { WorkloadIdentityIssuer } from './issuer.ts';

/** Verifiers refetch often enough to see a pre-published key well before it signs (prePublishMs). */
const CACHE_CONTROL = 'public, max-age=300';

/** The OIDC discovery documents AWS and GCP fetch to verify workload tokens; public, no auth. */
export function registerIdentityRoutes(app: FastifyInstance, issuer: Pick<WorkloadIdentityIssuer, 'jwks' | 'openidConfiguration'>): void {
  serve(app, R.openidConfiguration, async (_req, reply) => {
    reply.header('cache-control', CACHE_CONTROL);
    return issuer.openidConfiguration();
  });
  serve(app, R.jwks, async (_req, reply) => {
    reply.header('cache-control', CACHE_CONTROL);
    return issuer.jwks();
  });
}
