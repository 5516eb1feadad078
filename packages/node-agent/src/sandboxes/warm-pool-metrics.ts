import { collect, gauge, type Logger } from '@svc/common';
import type { WarmPool } from './warm-pool.ts';

/**
 * svc_warm_pool_sandboxes, read from the pool at each scrape (docs/observability.md,
 * "Prometheus"). The pool is per template artifact: `template` is the template whose create last
 * asked for that artifact's pool, '' before one did (a pool filled when its artifact arrived).
 * Answers what unregisters it (the agent closed).
 */
export function collectWarmPoolMetrics(pool: Pick<WarmPool, 'readyByArtifact'>, logger: Logger): () => void {
  return collect(
    gauge('svc_warm_pool_sandboxes', 'Warm sandboxes ready to be handed out, by template and template artifact.', ['template', 'artifact']),
    () => pool.readyByArtifact().map((p) => ({ labels: { template: p.templateId, artifact: p.artifactId }, value: p.ready })),
    (err) => logger.warn({ err: err.message }, 'the warm pool could not be read for a scrape'),
  );
}
