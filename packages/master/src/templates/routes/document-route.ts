import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import type { PublicPath } from '@svc/contracts';
import { documentedRoute } from '@svc/contracts/route-schemas';

type Parts = { Params?: unknown; Querystring?: unknown; Body?: unknown };
export type Handler<P extends Parts> = (req: FastifyRequest<P>, reply: FastifyReply) => Promise<unknown>;

/**
 * Registers a template route under its path in the public OpenAPI document, whose schemas check
 * its input and shape its answer (the gateway passes these routes through unchanged).
 */
export function documentRoute(app: FastifyInstance) {
  return <P extends Parts>(method: HTTPMethods | HTTPMethods[], path: PublicPath, handler: Handler<P>) =>
    app.route({ ...documentedRoute(method, path), handler: handler as Handler<Parts> });
}
