import type { FastifyRequest } from 'fastify';
import { forbidden, sameSecret, unavailable } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER } from '@svc/contracts/egress';

/**
 * The one check of the egress proxy's calls to the master (policies, secret values, workload
 * tokens): X-Svc-Admin-Token must equal egress.admin_token. Unset on the master: 503, fail closed.
 */
export function requireEgressAdmin(req: FastifyRequest, token: string | undefined, what: string): void {
  if (!token) throw unavailable(`egress.admin_token is not set on the master: the egress proxy cannot ${what} (fail closed)`);
  const presented = req.headers[EGRESS_ADMIN_TOKEN_HEADER];
  if (typeof presented !== 'string' || !sameSecret(presented, token)) throw forbidden('X-Svc-Admin-Token must equal egress.admin_token');
}
