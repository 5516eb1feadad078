import type { FastifyInstance, FastifyRequest } from 'fastify';
import { createHttpApp, forbidden, sameSecret, scrapeToken, sendMetrics, unavailable, type Logger, type TaskStats } from '@svc/common';
import { ADMIN_TOKEN_HEADER, PROXY_ADMIN_ROUTES as R, type ProxyHealth } from '@svc/contracts/proxy-admin';
import { serve } from '@svc/contracts/route-table';

const TOKEN_MISMATCH = 'admin token mismatch: X-Svc-Admin-Token must equal the proxy\'s $svc_admin_token';
const NO_TOKEN = 'the proxy\'s admin API is off: proxy.admin_token ($svc_admin_token) is not configured';

export interface AdminHandlers {
  /** cluster_tls: the admin listener serves HTTPS (docs/cluster.md). */
  https?: { key: Buffer; cert: Buffer };
  proxyId: string;
  adminToken: string;
  heartbeatLastPushedMs(): number;
  /** Cached routes: this process's, or summed over its workers. */
  cachedBackends(): number | Promise<number>;
  tasks(): Record<string, TaskStats> | Promise<Record<string, TaskStats>>;
  /** Done once the routes are forgotten everywhere (every worker acknowledged); answers how many were cached. */
  purge(sandboxIds: string[] | undefined): number | Promise<number>;
}

/**
 * The admin API on its own port (8082 by default): the routes of PROXY_ADMIN_ROUTES
 * (packages/contracts/src/proxy-admin.ts), health, the process's metrics (its workers' summed in)
 * and backend-cache purge; admin-routes.test.ts holds the two the same. All but health need the
 * admin token, and answer 503 when none is configured.
 */
export function createAdminApp(logger: Logger, h: AdminHandlers): FastifyInstance {
  const app = createHttpApp({ logger, https: h.https });

  serve(app, R.health, async (): Promise<ProxyHealth> => {
    const [cachedBackends, tasks] = await Promise.all([h.cachedBackends(), h.tasks()]);
    return { ok: true, proxyId: h.proxyId, heartbeat_last_pushed_ms: h.heartbeatLastPushedMs(), cachedBackends, tasks };
  });

  // The token is checked on request, before the body is read and validated: a caller without it
  // learns nothing of the body's shape.
  const checkToken = async (req: FastifyRequest) => checkAdminToken(h.adminToken, req.headers[ADMIN_TOKEN_HEADER]);

  // The same token, taken from Authorization: Bearer too, which is all an older Prometheus sends.
  serve(app, R.metrics, async (req, reply) => {
    checkAdminToken(h.adminToken, scrapeToken(req.headers, ADMIN_TOKEN_HEADER));
    return sendMetrics(reply);
  });

  app.register(async (guarded) => {
    guarded.addHook('onRequest', checkToken);
    serve(guarded, R.purge, async (req, reply) => {
      const ids = req.body?.sandboxIds;
      // Answered only once every cache forgot them: the master's change waits for this.
      const purged = await h.purge(ids);
      logger.debug({ purged, sandboxIds: ids }, 'backend cache purged');
      return reply.status(204).send();
    });
  });

  return app;
}

/**
 * The presented token must equal the configured one (403). With none configured every caller is
 * refused (503), as the egress proxy's admin API does: this port listens where the data plane
 * does, and a purge of everything, repeated, sends every request to the master.
 */
function checkAdminToken(configured: string, presented: unknown): void {
  if (configured === '') throw unavailable(NO_TOKEN);
  if (typeof presented !== 'string' || presented === '' || !sameSecret(configured, presented)) throw forbidden(TOKEN_MISMATCH);
}
