/**
 * `Webhooks`: the team's lifecycle event webhooks (E2B's `/events/webhooks`, @svc/contracts/events),
 * and `verifyWebhookSignature` for the receiving end. No answer carries a webhook's signature secret.
 *
 * Errors: a bad field is refused here, before any request (InvalidArgumentError); a missing webhook
 * is a NotFoundError; the server's other refusals (a URL aimed at the platform itself, too many
 * webhooks) are ApiErrors carrying `status` and `code`.
 */
import { timingSafeEqual } from 'node:crypto';
import {
  EVENT_LIMITS, WEBHOOK_HEADERS, webhookSignature, type SandboxEventType, type WebhookDeliveryOutcome, type WireWebhook,
} from '@svc/contracts/events';
import { ApiClient, type ApiRequest } from './api-client.ts';
import { ApiError, InvalidArgumentError, NotFoundError } from './errors.ts';
import { checkEventTypes } from './events.ts';
import type { SandboxApiOpts } from './types.ts';

/** A webhook as the API answers it, without its secret. */
export type Webhook = WireWebhook;
export type { WebhookDeliveryOutcome };
export { WEBHOOK_HEADERS };

export interface NewWebhook {
  /** 1 to 256 characters. */
  name: string;
  /** http or https, at most 2048 characters, without a user or password. */
  url: string;
  /** Default true. */
  enabled?: boolean;
  /** The event types delivered; at least one. */
  events: SandboxEventType[];
  /** Signs each delivery (`verifyWebhookSignature`); 1 to 1024 characters. */
  signatureSecret: string;
}

/** The fields given replace the webhook's; at least one. */
export type WebhookUpdate = Partial<NewWebhook>;

/** 400 is the server's refusal, told apart from the checks here (InvalidArgumentError). */
const REFUSED: Pick<ApiRequest, 'errorClasses'> = { errorClasses: { 400: ApiError } };
const ONE_WEBHOOK: Pick<ApiRequest, 'notFound' | 'errorClasses'> = { ...REFUSED, notFound: NotFoundError };

/** Characters as the server's schema counts them: code points. */
function text(value: unknown, what: string, max: number): string {
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError(`${what} must be a non-empty string`);
  const chars = [...value].length;
  if (chars > max) throw new InvalidArgumentError(`${what} has ${chars} characters; at most ${max}`);
  return value;
}

/** The form the master checks too (its reachability is the master's to judge). */
function checkUrl(value: unknown): string {
  const raw = text(value, 'url', EVENT_LIMITS.webhookUrlMaxChars);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new InvalidArgumentError(`url is not a URL: ${JSON.stringify(raw.slice(0, 100))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`url must be http or https, not ${url.protocol.replace(/:$/, '')}`);
  if (url.username || url.password) throw new InvalidArgumentError('url must not carry a user or password: the signature secret authenticates deliveries');
  return raw;
}

/** At least one known type; a type named twice is sent once (the server refuses repeats). */
function checkEvents(value: unknown): SandboxEventType[] {
  const types = checkEventTypes(value, 'events');
  if (types.length === 0) throw new InvalidArgumentError('events must name at least one event type');
  return [...new Set(types)];
}

function checkEnabled(value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError('enabled must be true or false');
  return value;
}

function webhookParams(webhookId: unknown) {
  if (typeof webhookId !== 'string' || webhookId === '') throw new InvalidArgumentError('a webhook id is required');
  return { webhookID: webhookId };
}

/** The fields of `w` that are set, checked; only the known ones, so a misspelt field is not silently sent. */
function webhookBody(w: WebhookUpdate): WebhookUpdate {
  const body: WebhookUpdate = {};
  if (w.name !== undefined) body.name = text(w.name, 'name', EVENT_LIMITS.webhookNameMaxChars);
  if (w.url !== undefined) body.url = checkUrl(w.url);
  if (w.enabled !== undefined) body.enabled = checkEnabled(w.enabled);
  if (w.events !== undefined) body.events = checkEvents(w.events);
  if (w.signatureSecret !== undefined) body.signatureSecret = text(w.signatureSecret, 'signatureSecret', EVENT_LIMITS.webhookSecretMaxChars);
  return body;
}

export class Webhooks {
  /** Registers a webhook; every field is checked before anything is sent. */
  static async create(webhook: NewWebhook, opts: SandboxApiOpts = {}): Promise<Webhook> {
    if (typeof webhook !== 'object' || webhook === null) throw new InvalidArgumentError('create takes {name, url, events, signatureSecret, enabled?}');
    const { name, url, events, signatureSecret, enabled } = webhookBody(webhook);
    const missing = ([['name', name], ['url', url], ['events', events], ['signatureSecret', signatureSecret]] as const).filter(([, v]) => v === undefined);
    if (missing.length) throw new InvalidArgumentError(`a webhook needs ${missing.map(([k]) => k).join(', ')}`);
    const body = { name: name!, url: url!, events: events!, signatureSecret: signatureSecret!, ...(enabled === undefined ? {} : { enabled }) };
    return new ApiClient(opts).request('POST', '/events/webhooks', { body, ...REFUSED, signal: opts.signal });
  }

  /** The team's webhooks. */
  static async list(opts: SandboxApiOpts = {}): Promise<Webhook[]> {
    const listed = await new ApiClient(opts).request('GET', '/events/webhooks', { ...REFUSED, signal: opts.signal });
    return Array.isArray(listed) ? listed : [];
  }

  /** The webhook; a NotFoundError when the team has none of this id. */
  static async get(webhookId: string, opts: SandboxApiOpts = {}): Promise<Webhook> {
    return new ApiClient(opts).request('GET', '/events/webhooks/{webhookID}', { params: webhookParams(webhookId), ...ONE_WEBHOOK, signal: opts.signal });
  }

  /** Replaces the fields given; a NotFoundError when the team has no such webhook. */
  static async update(webhookId: string, changes: WebhookUpdate, opts: SandboxApiOpts = {}): Promise<Webhook> {
    const params = webhookParams(webhookId);
    if (typeof changes !== 'object' || changes === null) throw new InvalidArgumentError('update takes the fields to change');
    const body = webhookBody(changes);
    if (Object.keys(body).length === 0) throw new InvalidArgumentError('give at least one of name, url, enabled, events, signatureSecret to change');
    return new ApiClient(opts).request('PATCH', '/events/webhooks/{webhookID}', { params, body, ...ONE_WEBHOOK, signal: opts.signal });
  }

  /** Deletes the webhook: true when it did, false when there was no such webhook. */
  static async delete(webhookId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    const params = webhookParams(webhookId);
    try {
      await new ApiClient(opts).request('DELETE', '/events/webhooks/{webhookID}', { params, ...ONE_WEBHOOK, signal: opts.signal });
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Whether a delivery's `e2b-signature` header (WEBHOOK_HEADERS.signature) is the signature of
 * `rawBody`, the request body exactly as received, under `secret`. Compared in constant time. The
 * header may be in either base64 alphabet, padded or not (E2B's docs' check maps one to the other).
 */
export function verifyWebhookSignature(secret: string, rawBody: string | Uint8Array, signatureHeader: string | string[] | null | undefined): boolean {
  if (typeof secret !== 'string' || secret === '') return false;
  const header = Array.isArray(signatureHeader) ? (signatureHeader.length === 1 ? signatureHeader[0] : undefined) : signatureHeader;
  if (typeof header !== 'string') return false;
  let body: string;
  if (typeof rawBody === 'string') body = rawBody;
  else {
    try {
      body = fatalUtf8.decode(rawBody);
    } catch {
      /* the server signs text; bytes that are no UTF-8 text were not signed by it */
      return false;
    }
  }
  const expected = Buffer.from(webhookSignature(secret, body));
  const given = Buffer.from(header.trim().replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
  // A SHA-256 digest's length is public: only the content is compared in constant time.
  return given.length === expected.length && timingSafeEqual(given, expected);
}
