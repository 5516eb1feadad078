/**
 * What the master adds to a scrape of `/metrics` (docs/observability.md, "Prometheus"): gauges
 * read from its database when scraped (sandboxes, build jobs, nodes' memory), and the route itself.
 */
import type { FastifyInstance } from 'fastify';
import { collect, gauge, notFound, sendMetrics, type Logger } from '@svc/common';
import { MASTER_INTERNAL_ROUTES } from '@svc/contracts/master-internal';
import { serve } from '@svc/contracts/route-table';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { SandboxRepo } from '../sandboxes/repo.ts';
import { callerTeam } from '../teams/caller.ts';
import type { JobStore } from '../templates/store/jobs.ts';

const MIB = 1024 * 1024;

export interface TableMetricsDeps {
  sandboxes: Pick<SandboxRepo, 'liveCounts'>;
  jobs: Pick<JobStore, 'countsByStatus'>;
  nodes: Pick<NodeRegistry, 'list'>;
  logger: Logger;
}

/** Registers the gauges read from the master's tables at each scrape; answers what unregisters them (the master closed). */
export function collectTableMetrics(d: TableMetricsDeps): () => void {
  const failed = (metric: string) => (err: Error) => d.logger.warn({ metric, err: err.message }, 'a metric could not be read for a scrape; it is left out of this one');
  const off = [
    collect(
      gauge('svc_sandboxes', 'Sandboxes that are not terminated, by state (running, pausing, paused, resuming, killing), template id and runtime.', ['state', 'template', 'runtime']),
      async () => (await d.sandboxes.liveCounts()).map((r) => ({ labels: { state: r.state, template: r.templateId, runtime: r.runtime }, value: r.count })),
      failed('svc_sandboxes'),
    ),
    collect(
      gauge('svc_build_jobs', 'Template build jobs the master holds, by status (PENDING, RUNNING, BUILT, FAILED).', ['status']),
      async () => (await d.jobs.countsByStatus()).map((r) => ({ labels: { status: r.status }, value: r.count })),
      failed('svc_build_jobs'),
    ),
    collect(
      gauge('svc_node_memory_bytes', 'Memory of each node that answers its heartbeats, by kind: capacity (its memory), used (what its sandboxes count for, after the paused release ratio) and available (the host\'s MemAvailable, when the node measures it).', ['node', 'kind']),
      async () => (await d.nodes.list()).filter((n) => n.status !== 'unreachable').flatMap((n) => [
        { labels: { node: n.nodeId, kind: 'capacity' }, value: n.capacity.memoryMB * MIB },
        { labels: { node: n.nodeId, kind: 'used' }, value: n.usage.usedMemoryMB * MIB },
        ...(n.usage.memory ? [{ labels: { node: n.nodeId, kind: 'available' }, value: n.usage.memory.availableMB * MIB }] : []),
      ]),
      failed('svc_node_memory_bytes'),
    ),
  ];
  return () => { for (const f of off) f(); };
}

/**
 * GET /metrics on the master's port: the process's metrics, for the operator. A call the gateway
 * makes for a team is a 404, as on the master's other operator routes.
 */
export function registerMetricsRoute(app: FastifyInstance): void {
  serve(app, MASTER_INTERNAL_ROUTES.metrics, async (req, reply) => {
    if (callerTeam(req) !== undefined) throw notFound(`no route for ${req.method} ${req.url.split('?')[0]}`);
    return sendMetrics(reply);
  });
}
