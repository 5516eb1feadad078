/**
 * Sandbox lifecycle events and webhooks: E2B's `/events` wire shapes (its docs pages "Lifecycle
 * events API" and "Lifecycle events webhooks"), served by the master; the gateway forwards them
 * unchanged with the team header (docs/observability.md).
 *
 *   GET    /events/sandboxes?offset&limit&orderAsc&types   → WireSandboxEvent[] (the team's)
 *   GET    /events/sandboxes/:sandboxID?...                 → WireSandboxEvent[] | 404
 *   POST   /events/webhooks                                 → 201 WireWebhook
 *   GET    /events/webhooks                                 → WireWebhook[]
 *   GET    /events/webhooks/:webhookID                      → WireWebhook | 404
 *   PATCH  /events/webhooks/:webhookID                      → WireWebhook | 404
 *   DELETE /events/webhooks/:webhookID                      → 200 | 404
 * No answer carries a webhook's signature secret. Another team's sandbox or webhook is a 404.
 */
import { createHash } from 'node:crypto';
import { badRequest } from '@svc/common';
import { answers, type RouteTable } from './route-table.ts';

export const SANDBOX_EVENT_TYPES = [
  'sandbox.lifecycle.created',
  'sandbox.lifecycle.updated',
  'sandbox.lifecycle.paused',
  'sandbox.lifecycle.resumed',
  'sandbox.lifecycle.killed',
  'sandbox.lifecycle.snapshotted',
] as const;
export type SandboxEventType = (typeof SANDBOX_EVENT_TYPES)[number];

export const EVENT_LIMITS = {
  listDefault: 10,
  listMax: 100,
  /** The largest offset: beyond it a 400 (an unbounded one was a 500 on PostgreSQL, bigint out of range). */
  offsetMax: 1_000_000,
  webhookNameMaxChars: 256,
  webhookUrlMaxChars: 2048,
  webhookSecretMaxChars: 1024,
  webhooksPerTeam: 50,
  /** E2B's delivery rule: a failed delivery is retried this many times, this far apart. */
  deliveryRetries: 3,
  deliveryRetryDelayMs: 10_000,
  /** An answer that takes longer is a failed attempt. */
  deliveryTimeoutMs: 10_000,
} as const;

/** On paused and killed: the run that ended (E2B's `eventData.execution`). */
export interface SandboxExecution {
  /** When this run (a create or a resume) started, RFC 3339. */
  started_at: string;
  vcpu_count: number;
  memory_mb: number;
  /** The run's length in milliseconds. */
  execution_time: number;
}

/** What changed; null when nothing more than the type says. */
export interface SandboxEventData {
  /** On updated: the new deadline, RFC 3339. */
  set_timeout?: string;
  execution?: SandboxExecution;
  sandbox_metadata?: Record<string, string>;
  /** On snapshotted: the snapshot made. */
  snapshot_id?: string;
  /** svc's: why (api, timeout, drain, oom, node lost, ...). */
  reason?: string;
}

/** E2B's event, as listed and as POSTed to a webhook. */
export interface WireSandboxEvent {
  version: 'v1';
  id: string;
  type: SandboxEventType;
  eventData: SandboxEventData | null;
  sandboxId: string;
  /** One run of the sandbox: a create or a resume starts a new one. */
  sandboxExecutionId: string;
  sandboxBuildId: string;
  sandboxTemplateId: string;
  sandboxTeamId: string;
  timestamp: string;
}

/** The last delivery attempt of a webhook (svc's addition to E2B's shape). */
export interface WebhookDeliveryOutcome {
  at: string;
  eventId: string;
  /** delivered, retrying, or failed (every retry spent). */
  outcome: 'delivered' | 'retrying' | 'failed';
  /** The endpoint's HTTP status; absent when it gave none (refused, timed out, refused by the target check). */
  status?: number;
  error?: string;
}

/** E2B's webhook, without its secret. */
export interface WireWebhook {
  id: string;
  teamID: string;
  name: string;
  createdAt: string;
  enabled: boolean;
  url: string;
  events: SandboxEventType[];
  lastDelivery?: WebhookDeliveryOutcome;
}

const eventType = { type: 'string', enum: SANDBOX_EVENT_TYPES } as const;
const name = { type: 'string', minLength: 1, maxLength: EVENT_LIMITS.webhookNameMaxChars } as const;
const url = { type: 'string', minLength: 1, maxLength: EVENT_LIMITS.webhookUrlMaxChars } as const;
const events = { type: 'array', items: eventType, minItems: 1, uniqueItems: true } as const;
const signatureSecret = { type: 'string', minLength: 1, maxLength: EVENT_LIMITS.webhookSecretMaxChars } as const;

const NewWebhookBody = {
  type: 'object',
  required: ['name', 'url', 'events', 'signatureSecret'],
  properties: { name, url, enabled: { type: 'boolean', default: true }, events, signatureSecret },
  additionalProperties: false,
} as const;

/** The fields given replace the old; none given is a 400. */
const WebhookPatchBody = {
  type: 'object',
  minProperties: 1,
  properties: { name, url, enabled: { type: 'boolean' }, events, signatureSecret },
  additionalProperties: false,
} as const;

const ListEventsQuery = {
  type: 'object',
  properties: {
    offset: { type: 'integer', minimum: 0, maximum: EVENT_LIMITS.offsetMax, default: 0 },
    limit: { type: 'integer', minimum: 1, maximum: EVENT_LIMITS.listMax, default: EVENT_LIMITS.listDefault },
    orderAsc: { type: 'boolean', default: false },
    types: { type: 'array', items: eventType },
  },
  additionalProperties: false,
} as const;

/** The master's event and webhook routes (route-table.ts). */
export const EVENT_ROUTES = {
  teamEvents: { method: 'GET', path: '/events/sandboxes', query: ListEventsQuery, answer: answers<WireSandboxEvent[]>() },
  sandboxEvents: { method: 'GET', path: '/events/sandboxes/:sandboxID', query: ListEventsQuery, answer: answers<WireSandboxEvent[]>() },
  createWebhook: { method: 'POST', path: '/events/webhooks', body: NewWebhookBody, answer: answers<WireWebhook>() },
  listWebhooks: { method: 'GET', path: '/events/webhooks', answer: answers<WireWebhook[]>() },
  getWebhook: { method: 'GET', path: '/events/webhooks/:webhookID', answer: answers<WireWebhook>() },
  updateWebhook: { method: 'PATCH', path: '/events/webhooks/:webhookID', body: WebhookPatchBody, answer: answers<WireWebhook>() },
  deleteWebhook: { method: 'DELETE', path: '/events/webhooks/:webhookID', answer: answers<void>() },
} as const satisfies RouteTable;

/** The headers of a delivery (E2B's names). */
export const WEBHOOK_HEADERS = {
  webhookId: 'e2b-webhook-id',
  deliveryId: 'e2b-delivery-id',
  signatureVersion: 'e2b-signature-version',
  signature: 'e2b-signature',
} as const;

/**
 * E2B's delivery signature: SHA-256 of the secret followed by the raw body, in unpadded
 * base64url (its docs' check maps + to -, / to _ and drops the padding; docs/compatibility.md).
 */
export function webhookSignature(secret: string, rawBody: string): string {
  return createHash('sha256').update(secret + rawBody).digest('base64url');
}

/** A webhook URL's form (http or https, no user or password): a 400 naming what is wrong. Where it points is the master's check. */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest(`url is not a URL: ${JSON.stringify(raw.slice(0, 100))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badRequest(`url must be http or https, not ${url.protocol.replace(/:$/, '')}`);
  if (url.username || url.password) throw badRequest('url must not carry a user or password: sign with the signature secret');
  return url;
}
