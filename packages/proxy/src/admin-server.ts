import type { FastifyInstance } from 'fastify';
import { createHttpApp, forbidden, sameSecret, type Logger, type TaskStats } from '@svc/common';
import { ADMIN_TOKEN_HEADER, type ProxyHealth } from '@svc/contracts/proxy-admin';

export interface AdminHandlers {
  /** cluster_tls: the admin listener serves HTTPS (docs/cluster.md). */
  https?: { key: Buffer; cert: Buffer };
  proxyId: string;
  adminToken: string;
  heartbeatLastPushedMs(): number;
  cachedBackends(): number;
  tasks(): Record<string, TaskStats>;
  purge(sandboxIds: string[] | undefined): number;
}

/** The admin API on its own port (8082 by default): health and backend-cache purge. */
export function createAdminApp(logger: Logger, h: AdminHandlers): FastifyInstance {
  const app = createHttpApp({ logger, https: h.https });

  app.get('/admin/healthz', async (): Promise<ProxyHealth> => ({
    ok: true,
    proxyId: h.proxyId,
    heartbeat_last_pushed_ms: h.heartbeatLastPushedMs(),
    cachedBackends: h.cachedBackends(),
    tasks: h.tasks(),
  }));

  app.post('/admin/backend_cache/delete', async (req, reply) => {
    const presented = req.headers[ADMIN_TOKEN_HEADER];
    if (!adminTokenAccepted(h.adminToken, typeof presented === 'string' ? presented : undefined)) {
      throw forbidden('admin token mismatch: X-Svc-Admin-Token must equal the proxy\'s $svc_admin_token');
    }
    const body = (req.body ?? {}) as { sandboxIds?: unknown };
    const ids = Array.isArray(body.sandboxIds) ? body.sandboxIds.filter((x): x is string => typeof x === 'string') : undefined;
    const purged = h.purge(ids);
    logger.debug({ purged, sandboxIds: ids }, 'backend cache purged');
    return reply.status(204).send();
  });

  return app;
}

/** Both unset: allowed (development). Set on only one side, or different: refused. */
export function adminTokenAccepted(configured: string, presented: string | undefined): boolean {
  const have = presented ?? '';
  if (configured === '' && have === '') return true;
  if (configured === '' || have === '') return false;
  return sameSecret(configured, have);
}
