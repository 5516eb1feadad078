import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound } from '@svc/common';
import { EVENT_ROUTES as R, type SandboxEventType, type WireSandboxEvent } from '@svc/contracts/events';
import { serve, type QueryOf } from '@svc/contracts/route-table';
import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { callerTeam } from '../teams/caller.ts';
import type { EventRepo } from './event-repo.ts';
import { toWireEvent } from './recorder.ts';
import type { WebhookService } from './webhooks.ts';

/**
 * E2B's `/events` routes (EVENT_ROUTES, packages/contracts/src/events.ts); the gateway forwards
 * them with the team header, and the operator (no header) acts as the default team.
 */
export function registerEventRoutes(app: FastifyInstance, events: EventRepo, webhooks: WebhookService): void {
  const teamOf = (req: FastifyRequest) => callerTeam(req) ?? DEFAULT_TEAM_ID;
  const page = async (teamId: string, q: QueryOf<typeof R.teamEvents>, sandboxId?: string): Promise<WireSandboxEvent[]> => {
    const rows = await events.list(teamId, { sandboxId, offset: q.offset, limit: q.limit, asc: q.orderAsc, types: q.types as SandboxEventType[] | undefined });
    return rows.map(toWireEvent);
  };

  serve(app, R.teamEvents, async (req) => page(teamOf(req), req.query));
  serve(app, R.sandboxEvents, async (req) => {
    const teamId = teamOf(req);
    // Another team's sandbox is a 404 like one that never was: its events are the other team's.
    if (!(await events.teamHasSandbox(teamId, req.params.sandboxID))) throw notFound(`sandbox ${req.params.sandboxID} not found`);
    return page(teamId, req.query, req.params.sandboxID);
  });

  serve(app, R.createWebhook, async (req, reply) => {
    const made = await webhooks.create(teamOf(req), { ...req.body, enabled: req.body.enabled ?? true });
    reply.status(201);
    return made;
  });
  serve(app, R.listWebhooks, async (req) => webhooks.list(teamOf(req)));
  serve(app, R.getWebhook, async (req) => webhooks.get(teamOf(req), req.params.webhookID));
  serve(app, R.updateWebhook, async (req) => webhooks.update(teamOf(req), req.params.webhookID, req.body));
  serve(app, R.deleteWebhook, async (req, reply) => {
    await webhooks.delete(teamOf(req), req.params.webhookID);
    return reply.status(200).send();
  });
}
