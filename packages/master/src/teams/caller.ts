import type { FastifyRequest } from 'fastify';
import { badRequest } from '@svc/common';
import { TEAM_HEADER } from '@svc/contracts/teams';

/**
 * The team a master call is made for: the gateway sets TEAM_HEADER after it verified the key
 * (docs/security.md). undefined: the operator (svc up, the CLI on the master's private address,
 * the tests), who sees every team's resources.
 */
export function callerTeam(req: FastifyRequest): string | undefined {
  const v = req.headers[TEAM_HEADER];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !v) throw badRequest(`${TEAM_HEADER} must be one team id`);
  return v;
}
