import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { SvcError } from '@svc/common';
import { callerTeam } from './caller.ts';

/** Whose a resource is: its team, and whether every team may read it (svc up's base templates). */
export interface Owner {
  teamId: string;
  public?: boolean;
}

/** A kind of resource a route names by id: where its id is, and how to find its owner. */
export interface OwnedRoute {
  /** Matches the route's pattern as registered (`/v1/sandboxes/:id/pause`, `/templates/{templateID}`...). */
  route: RegExp;
  /** The id, from the request (a path parameter, or a body field). */
  idOf(req: FastifyRequest): string | undefined;
  /** undefined when nothing has that id: the route's own handler answers its 404. */
  ownerOf(id: string): Promise<Owner | undefined>;
  /** The 404 another team's id gets: the same one a missing id gets (docs/security.md). */
  notFound(id: string): SvcError;
}

/**
 * The one check that a team's call names only its own resources (docs/security.md, "Isolation"):
 * before the handler of every route listed, an id another team owns answers the same 404 as an id
 * that does not exist, so the answer never tells that it exists. Public resources may be read
 * (GET) by every team. The operator (no team header) passes.
 */
export function guardOwnedRoutes(app: FastifyInstance, routes: OwnedRoute[]): void {
  app.addHook('preHandler', async (req) => {
    const caller = callerTeam(req);
    if (caller === undefined) return;
    const pattern = req.routeOptions.url ?? '';
    for (const r of routes) {
      if (!r.route.test(pattern)) continue;
      const id = r.idOf(req);
      if (id === undefined || id === '') continue;
      const owner = await r.ownerOf(id);
      if (!owner || owner.teamId === caller) continue;
      if (owner.public && req.method === 'GET') continue;
      throw r.notFound(id);
    }
  });
}

export const pathParam = (name: string) => (req: FastifyRequest): string | undefined => {
  const v = (req.params as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
};

export const queryField = (name: string) => (req: FastifyRequest): string | undefined => {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
};

export const bodyField = (name: string) => (req: FastifyRequest): string | undefined => {
  const v = (req.body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : undefined;
};

/** Whether a caller may start a sandbox from (or otherwise use) a resource of this owner. */
export function usableBy(caller: string | undefined, owner: Owner): boolean {
  return caller === undefined || owner.teamId === caller || owner.public === true;
}
