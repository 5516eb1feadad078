import type { FastifyInstance } from 'fastify';
import { ErrorCodes, schemaError, sendError, SvcError, toSvcError, UnreachableError } from '@svc/common';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { storeError } from '../errors.ts';

/**
 * Registers routes in a scope whose refused input is a 400 with the template code 130400, and whose
 * unexpected errors are database errors on the wire (the template store is the only thing behind
 * these routes that throws untyped errors).
 */
export function withTemplateErrors(app: FastifyInstance, register: (scope: FastifyInstance) => void): void {
  app.register(async (scope) => {
    scope.setSchemaErrorFormatter((errors, dataVar) => schemaError(errors as Parameters<typeof schemaError>[0], dataVar, ErrorCodes.badRequest));
    scope.setErrorHandler((err: unknown, req, reply) => {
      const status = (err as { statusCode?: number })?.statusCode;
      const e = err instanceof SvcError || (typeof status === 'number' && status < 500) ? toSvcError(err) : storeError(err);
      if (e.status >= 500) req.log.error({ err, path: req.url?.split('?')[0] }, 'template route failed');
      // A team's call (the gateway passes the answer on) hears no address of a component that did
      // not answer, nor the database's words, as on the master's other routes (index.ts).
      if (req.headers[TEAM_HEADER] !== undefined && e.status >= 500) {
        if (err instanceof UnreachableError) return sendError(reply, new SvcError(503, err.publicMessage, { headers: err.headers }));
        if (!(err instanceof SvcError)) return sendError(reply, new SvcError(500, 'the template store failed; retry, and tell the operator if it persists'));
      }
      sendError(reply, e);
    });
    register(scope);
  });
}
