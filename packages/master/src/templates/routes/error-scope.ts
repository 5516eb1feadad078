import type { FastifyInstance } from 'fastify';
import { ErrorCodes, schemaError, sendError, SvcError, toSvcError } from '@svc/common';
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
      sendError(reply, e);
    });
    register(scope);
  });
}
