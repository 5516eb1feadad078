import type { FastifyInstance, FastifyRequest } from 'fastify';

/**
 * Registers routes in a scope whose guard (a token check, the operator's routes) runs before
 * their schemas are checked: a caller the guard refuses gets the refusal it got when the handler
 * checked the body itself, and learns nothing of the body's rules.
 */
export function guardedRoutes(app: FastifyInstance, guard: (req: FastifyRequest) => void, register: (scope: FastifyInstance) => void): void {
  void app.register(async (scope) => {
    scope.addHook('preValidation', async (req) => guard(req));
    register(scope);
  });
}
