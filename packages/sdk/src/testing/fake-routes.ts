import type { FastifyReply, HTTPMethods } from 'fastify';
import type { PublicPath } from '@svc/contracts';

/** How the fake API registers a route of the public document (fake-api.ts `on`), for its route groups in files of their own. */
export type FakeOn = (method: HTTPMethods, path: PublicPath, handler: (req: any, reply: FastifyReply) => unknown) => unknown;

/** The platform's JSON error body (docs/api.md), as the fake API's routes answer a refusal. */
export function fakeError(reply: FastifyReply, status: number, message: string, code = status) {
  return reply.status(status).send({ code, message });
}
