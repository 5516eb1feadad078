/**
 * The lifecycle events and webhooks routes of the fake API gateway (fake-api.ts), served from the
 * master's route table (@svc/contracts/events), so its schemas check what the SDK sends as the
 * master's do. One team; nothing records events by itself: a test adds them with `record`, and
 * nothing is delivered.
 */
import type { FastifyInstance } from 'fastify';
import { badRequest, notFound } from '@svc/common';
import { EVENT_LIMITS, EVENT_ROUTES, parseWebhookUrl, type SandboxEventData, type SandboxEventType, type WireSandboxEvent, type WireWebhook } from '@svc/contracts/events';
import { serve } from '@svc/contracts/route-table';

export const FAKE_TEAM_ID = 'team-fake';

export interface FakeEvents {
  /** Every event, in the order recorded. */
  events: WireSandboxEvent[];
  /** The webhooks by id, with the secret the API never answers. */
  webhooks: Map<string, WireWebhook & { signatureSecret: string }>;
  /** Adds an event (`at` default now); ids grow with each, as the master's time-ordered ids do. */
  record(type: SandboxEventType, sandboxId: string, opts?: { at?: Date; data?: SandboxEventData | null; executionId?: string }): WireSandboxEvent;
}

/** Registers the routes on `app` (before it listens); `knownSandbox` answers whether the team has a sandbox. */
export function serveFakeEvents(app: FastifyInstance, knownSandbox: (sandboxId: string) => boolean): FakeEvents {
  const events: WireSandboxEvent[] = [];
  const webhooks = new Map<string, WireWebhook & { signatureSecret: string }>();
  let seq = 0;
  const nextId = (prefix: string) => `${prefix}-${String(++seq).padStart(8, '0')}`;

  const record: FakeEvents['record'] = (type, sandboxId, opts = {}) => {
    const e: WireSandboxEvent = {
      version: 'v1', id: nextId('evt'), type, eventData: opts.data ?? null, sandboxId,
      sandboxExecutionId: opts.executionId ?? `exec-${sandboxId}`, sandboxBuildId: 'build-base', sandboxTemplateId: 'base',
      sandboxTeamId: FAKE_TEAM_ID, timestamp: (opts.at ?? new Date()).toISOString(),
    };
    events.push(e);
    return e;
  };

  const page = (q: { offset: number; limit: number; orderAsc: boolean; types?: string[] }, sandboxId?: string) => {
    const rows = events
      .filter((e) => (sandboxId === undefined || e.sandboxId === sandboxId) && (!q.types?.length || q.types.includes(e.type)))
      .sort((a, b) => a.timestamp.localeCompare(b.timestamp) || a.id.localeCompare(b.id));
    if (!q.orderAsc) rows.reverse();
    return rows.slice(q.offset, q.offset + q.limit);
  };
  const visible = ({ signatureSecret: _secret, ...w }: WireWebhook & { signatureSecret: string }): WireWebhook => w;
  const webhookOf = (id: string) => {
    const w = webhooks.get(id);
    if (!w) throw notFound(`webhook ${id} not found`);
    return w;
  };

  serve(app, EVENT_ROUTES.teamEvents, async (req) => page(req.query));
  serve(app, EVENT_ROUTES.sandboxEvents, async (req) => {
    const id = req.params.sandboxID;
    if (!knownSandbox(id) && !events.some((e) => e.sandboxId === id)) throw notFound(`sandbox ${id} not found`);
    return page(req.query, id);
  });
  serve(app, EVENT_ROUTES.createWebhook, async (req, reply) => {
    if (webhooks.size >= EVENT_LIMITS.webhooksPerTeam) throw badRequest(`a team has at most ${EVENT_LIMITS.webhooksPerTeam} webhooks`);
    parseWebhookUrl(req.body.url);
    const w = { ...req.body, id: nextId('wh'), teamID: FAKE_TEAM_ID, createdAt: new Date().toISOString(), enabled: req.body.enabled ?? true };
    webhooks.set(w.id, w);
    return reply.status(201).send(visible(w));
  });
  serve(app, EVENT_ROUTES.listWebhooks, async () => [...webhooks.values()].map(visible));
  serve(app, EVENT_ROUTES.getWebhook, async (req) => visible(webhookOf(req.params.webhookID)));
  serve(app, EVENT_ROUTES.updateWebhook, async (req) => {
    const w = webhookOf(req.params.webhookID);
    if (req.body.url !== undefined) parseWebhookUrl(req.body.url);
    Object.assign(w, req.body);
    return visible(w);
  });
  serve(app, EVENT_ROUTES.deleteWebhook, async (req, reply) => {
    webhooks.delete(webhookOf(req.params.webhookID).id);
    return reply.status(200).send();
  });

  return { events, webhooks, record };
}
