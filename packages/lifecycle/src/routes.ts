import type { FastifyInstance } from 'fastify';
import { sendMetrics } from '@svc/common';
import { LIFECYCLE_ROUTES as R, type LifecycleHealth, type ProxyAnnouncement } from '@svc/contracts/lifecycle';
import type { SandboxRoute } from '@svc/contracts/master-internal';
import { serve } from '@svc/contracts/route-table';

export interface RouteDeps {
  health(): LifecycleHealth;
  /** Resumes a paused sandbox (coalesced across callers); its route once it runs. */
  resume(sandboxId: string): Promise<SandboxRoute>;
  /** Records a proxy's announcement where the master finds it. */
  recordProxy(a: ProxyAnnouncement): Promise<void>;
}

/** The routes of LIFECYCLE_ROUTES (packages/contracts/src/lifecycle.ts); routes.test.ts holds the two the same. */
export function registerRoutes(app: FastifyInstance, d: RouteDeps): void {
  serve(app, R.health, async () => d.health());
  // The process's Prometheus metrics; on the cluster's network, like the routes below (docs/observability.md).
  serve(app, R.metrics, async (_req, reply) => sendMetrics(reply));
  serve(app, R.resume, async (req) => d.resume(req.body.sandboxId));
  serve(app, R.proxyHeartbeat, async (req, reply) => {
    await d.recordProxy(req.body);
    return reply.status(204).send();
  });
}
