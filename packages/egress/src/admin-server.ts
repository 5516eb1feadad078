import type { FastifyInstance, FastifyRequest } from 'fastify';
import { badRequest, createHttpApp, forbidden, notFound, sameSecret, scrapeToken, sendMetrics, unavailable, type Logger, type TaskStats } from '@svc/common';
import { EGRESS_ADMIN_TOKEN_HEADER, EgressRuleError, redactPolicy, type EgressHealth } from '@svc/contracts/egress';
import { EGRESS_ADMIN_ROUTES as R } from '@svc/contracts/egress-routes';
import { serve } from '@svc/contracts/route-table';
import { checkPolicy } from './policy-check.ts';
import type { PolicyStore } from './policy-store.ts';
import type { PolicyChange } from './policy-sync.ts';

export interface EgressAdminOptions {
  logger: Logger;
  /** cluster_tls: the admin listener serves HTTPS (docs/cluster.md). */
  https?: { key: Buffer; cert: Buffer };
  adminToken: string;
  store: PolicyStore;
  tasks(): Record<string, TaskStats>;
  /** Whether the proxy serves by its policies yet; default the store's readiness. */
  ready?: () => boolean;
  /**
   * Runs after a put or delete changed the store and before the route answers: with worker
   * processes, it resolves once every worker has applied the change.
   */
  onChange?: (change: PolicyChange) => Promise<void>;
}

/**
 * The egress admin API: the routes of EGRESS_ADMIN_ROUTES (contracts/src/egress.ts);
 * admin-routes.test.ts holds the two the same. Health answers anyone; the metrics and the policy
 * routes need X-Svc-Admin-Token, and with no token configured they refuse everyone (503): the
 * policies hold secrets, so there is no open development mode.
 */
export function createEgressAdminApp(opts: EgressAdminOptions): FastifyInstance {
  const { store, logger } = opts;
  const ready = opts.ready ?? (() => store.ready);
  const changed = opts.onChange ?? (async () => { /* in-process: the store is the data path's own */ });
  const app = createHttpApp({ logger, https: opts.https });

  serve(app, R.health, async (): Promise<EgressHealth> => ({ ok: true, ready: ready(), policies: store.size, tasks: opts.tasks() }));

  const checkPresented = (presented: unknown) => {
    if (opts.adminToken === '') throw unavailable('the egress admin API is off: egress.admin_token is not configured');
    if (typeof presented !== 'string' || !sameSecret(presented, opts.adminToken)) {
      throw forbidden('admin token mismatch: X-Svc-Admin-Token must equal egress.admin_token');
    }
  };
  const checkToken = async (req: FastifyRequest) => checkPresented(req.headers[EGRESS_ADMIN_TOKEN_HEADER]);

  // The same token, taken from Authorization: Bearer too, which is all an older Prometheus sends.
  serve(app, R.metrics, async (req, reply) => {
    checkPresented(scrapeToken(req.headers, EGRESS_ADMIN_TOKEN_HEADER));
    return sendMetrics(reply);
  });

  app.register(async (routes) => {
    routes.addHook('onRequest', checkToken);

    serve(routes, R.listPolicies, async () => store.list().map(redactPolicy));

    serve(routes, R.getPolicy, async (req) => {
      const policy = store.get(req.params.sandboxId);
      if (!policy) throw notFound(`no egress policy for sandbox ${req.params.sandboxId}`);
      return redactPolicy(policy);
    });

    // The schema says the fields' types; what is inside them checkPolicy checks, as for every policy loaded.
    serve(routes, R.putPolicy, async (req) => {
      const body = req.body;
      if (body.sandboxId !== req.params.sandboxId) {
        throw badRequest(`the body's sandboxId ${JSON.stringify(body.sandboxId)} differs from the path's ${JSON.stringify(req.params.sandboxId)}`);
      }
      let policy;
      try {
        policy = checkPolicy(body);
      } catch (err) {
        if (err instanceof EgressRuleError) throw badRequest(err.message);
        throw err;
      }
      const { displaced } = store.put(policy);
      if (displaced) logger.info({ sandboxId: policy.sandboxId, address: policy.address, displaced }, 'egress policy replaced an older sandbox\'s at the same address');
      await changed({ kind: 'put', policy });
      return redactPolicy(policy);
    });

    serve(routes, R.deletePolicy, async (req, reply) => {
      store.delete(req.params.sandboxId);
      await changed({ kind: 'delete', sandboxId: req.params.sandboxId });
      return reply.status(204).send();
    });
  });

  return app;
}
