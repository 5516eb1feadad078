import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { platformNetworksOf, randomId, type Logger, type SvcConfig } from '@svc/common';
import type { Database } from '../db/schema.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import type { Sealer } from '../vault/vault.ts';
import { countWebhookAttempt } from '../prometheus/operations.ts';
import { WebhookDeliverer, type DelivererOptions } from './deliverer.ts';
import { EventRepo } from './event-repo.ts';
import { platformEndpoints } from './platform-endpoints.ts';
import { EventRecorder } from './recorder.ts';
import { registerEventRoutes } from './routes.ts';
import { WebhookRepo } from './webhook-repo.ts';
import { WebhookTargets } from './webhook-target.ts';
import { WebhookService } from './webhooks.ts';

const DAY_MS = 24 * 3600_000;

export type DeliveryTiming = Pick<DelivererOptions, 'pollMs' | 'retryDelayMs' | 'timeoutMs'>;

export interface EventsModule {
  /** What the sandbox transitions record through. */
  recorder: EventRecorder;
  registerRoutes(app: FastifyInstance): void;
  /** Sandboxes created per team within (from, to] (milliseconds): the team metrics' starts. */
  createsByTeam(from: number, to: number): Promise<Record<string, number>>;
  /** Drops events past events.retention_days, and deliveries finished as long ago. */
  prune(): Promise<void>;
  stop(): Promise<void>;
}

/** Lifecycle events and webhooks (docs/observability.md): their store, recorder, routes and deliverer. */
export function startEvents(cfg: SvcConfig, d: { db: Kysely<Database>; vault: Sealer; logger: Logger; nodes: NodeRegistry; timing?: DeliveryTiming }): EventsModule {
  const events = new EventRepo(d.db);
  const webhookRepo = new WebhookRepo(d.db);
  const targets = new WebhookTargets({
    platform: platformEndpoints(cfg, async () => (await d.nodes.list()).map((n) => n.address)),
    pools: [cfg.node_agent.address_pool],
    networks: platformNetworksOf(cfg),
    allowCidrs: cfg.events.webhook_allow_cidrs.split(',').map((c) => c.trim()).filter(Boolean),
  });
  const deliverer = new WebhookDeliverer({
    repo: webhookRepo, targets, vault: d.vault, logger: d.logger, holder: `master-${process.pid}-${randomId(6)}`, onOutcome: countWebhookAttempt, ...d.timing,
  });
  deliverer.start();
  const recorder = new EventRecorder({ events, webhooks: webhookRepo, logger: d.logger, onQueued: () => deliverer.kick() });
  const webhooks = new WebhookService({ repo: webhookRepo, targets, vault: d.vault });
  return {
    recorder,
    registerRoutes: (app) => registerEventRoutes(app, events, webhooks),
    createsByTeam: (from, to) => events.countByTeam('sandbox.lifecycle.created', from, to),
    async prune() {
      const before = Date.now() - cfg.events.retention_days * DAY_MS;
      const [gone, sent] = [await events.prune(before), await webhookRepo.pruneDone(before)];
      if (gone || sent) d.logger.info({ events: gone, deliveries: sent }, 'pruned lifecycle events and deliveries past their retention');
    },
    stop: () => deliverer.stop(),
  };
}
