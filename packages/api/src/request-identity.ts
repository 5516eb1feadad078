import type { FastifyRequest } from 'fastify';
import { forbidden } from '@svc/common';
import type { KeyIdentity } from '@svc/contracts/teams';
import { TEAM_HEADER } from '@svc/contracts/teams';

const identities = new WeakMap<FastifyRequest, KeyIdentity>();

/** Set once by authenticate(); undefined: authentication is off, and calls are the operator's. */
export function setIdentity(req: FastifyRequest, identity: KeyIdentity): void {
  identities.set(req, identity);
}

export function identityOf(req: FastifyRequest): KeyIdentity | undefined {
  return identities.get(req);
}

/** The header the master scopes a call by (docs/security.md); none for the operator. */
export function teamHeaders(req: FastifyRequest): Record<string, string> {
  const id = identities.get(req);
  return id ? { [TEAM_HEADER]: id.teamId } : {};
}

/** The operator's routes (teams, nodes): the admin key, or no key when authentication is off. */
export function requireAdmin(req: FastifyRequest, what: string): void {
  const id = identities.get(req);
  if (id && !id.admin) throw forbidden(`${what} are the operator's: this needs the admin API key (the one svc up printed), not a team key`);
}
