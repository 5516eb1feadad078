import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { withDeadline, type Logger } from '@svc/common';
import { EVENT_LIMITS, WEBHOOK_HEADERS, webhookSignature, type WebhookDeliveryOutcome } from '@svc/contracts/events';
import type { Sealer } from '../vault/vault.ts';
import type { DeliveryDbRow, WebhookRepo } from './webhook-repo.ts';
import type { WebhookTargets } from './webhook-target.ts';
import { sealContext } from './webhooks.ts';

export interface DelivererOptions {
  repo: WebhookRepo;
  targets: WebhookTargets;
  vault: Sealer;
  logger: Logger;
  /** This master, in the leases it takes. */
  holder: string;
  /** How often the queue is read when no event of this master's wakes it (another master's events, retries). */
  pollMs?: number;
  /** Attempts under way at once, and of one webhook: a slow endpoint holds only its own share. */
  maxInFlight?: number;
  perWebhook?: number;
  retries?: number;
  retryDelayMs?: number;
  timeoutMs?: number;
  /** Told each attempt's outcome (the metrics count them). */
  onOutcome?: (outcome: WebhookDeliveryOutcome['outcome']) => void;
}

/**
 * Sends the queued deliveries (docs/observability.md, "Webhooks"). Every master runs one; a
 * delivery is taken by a lease written compare-and-set, so one master sends each attempt, and a
 * master that dies mid-attempt leaves a lease that expires for another to take. An attempt that
 * gets no 2xx within the timeout is retried `retries` times, `retryDelayMs` apart, as E2B does.
 * Attempts run side by side, at most `perWebhook` for one webhook, so a dead endpoint delays
 * neither another webhook's deliveries nor the API.
 */
export class WebhookDeliverer {
  private readonly o: Required<Omit<DelivererOptions, 'onOutcome'>> & Pick<DelivererOptions, 'onOutcome'>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly perHook = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(opts: DelivererOptions) {
    this.o = {
      pollMs: 1_000, maxInFlight: 64, perWebhook: 4, retries: EVENT_LIMITS.deliveryRetries,
      retryDelayMs: EVENT_LIMITS.deliveryRetryDelayMs, timeoutMs: EVENT_LIMITS.deliveryTimeoutMs, ...opts,
    };
  }

  start(): void {
    this.timer = setInterval(() => this.kick(), this.o.pollMs);
    this.timer.unref();
    this.kick();
  }

  /** Reads the queue now (an event was queued); a read under way reads once more after. */
  kick(): void {
    if (this.stopped) return;
    if (this.reading) { this.again = true; return; }
    this.reading = this.pass().catch((err: Error) => this.o.logger.warn({ err: err.message }, 'webhook queue read failed; read again at the next poll'))
      .finally(() => {
        this.reading = undefined;
        if (this.again) { this.again = false; this.kick(); }
      });
  }

  /** Stops taking deliveries and waits for the read and the attempts under way (each ends within its timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.reading;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  /**
   * Takes what is due, webhook by webhook, up to each one's share: a webhook with a long backlog
   * (a dead endpoint) fills only its own share, and the others' deliveries are read past it.
   */
  private async pass(): Promise<void> {
    const now = Date.now();
    const busy = [...this.perHook].filter(([, n]) => n >= this.o.perWebhook).map(([id]) => id);
    for (const webhookId of await this.o.repo.dueWebhooks(now, busy, this.o.maxInFlight)) {
      const room = Math.min(this.o.perWebhook - (this.perHook.get(webhookId) ?? 0), this.o.maxInFlight - this.inFlight.size);
      if (room <= 0) continue;
      for (const d of await this.o.repo.due(webhookId, now, room)) {
        if (this.stopped) return;
        if (this.inFlight.has(d.delivery_id)) continue;
        // The lease outlasts the attempt: no other master takes it while this one may still send.
        const leaseUntil = now + this.o.timeoutMs + 30_000;
        if (!(await this.o.repo.claim(d, this.o.holder, leaseUntil))) continue;
        this.track(d, leaseUntil);
      }
    }
  }

  private track(d: DeliveryDbRow, leaseUntil: number): void {
    this.perHook.set(d.webhook_id, (this.perHook.get(d.webhook_id) ?? 0) + 1);
    const attempt = this.attempt(d, leaseUntil)
      .catch((err: Error) => this.o.logger.error({ deliveryId: d.delivery_id, err: err.message }, 'webhook attempt not recorded; its lease expires and it is tried again'))
      .finally(() => {
        this.inFlight.delete(d.delivery_id);
        const n = (this.perHook.get(d.webhook_id) ?? 1) - 1;
        if (n > 0) this.perHook.set(d.webhook_id, n); else this.perHook.delete(d.webhook_id);
        this.kick();
      });
    this.inFlight.set(d.delivery_id, attempt);
  }

  private async attempt(d: DeliveryDbRow, leaseUntil: number): Promise<void> {
    const hook = await this.o.repo.byId(d.webhook_id);
    // Deleted with its queue; a delivery read just before is dropped here.
    if (!hook) return;
    const attempts = d.attempts + 1;
    let result: { status?: number; error?: string };
    if (!hook.enabled) result = { error: 'the webhook is disabled' };
    else result = await this.send(hook.url, d, this.o.vault.open(hook.sealed_secret, sealContext(hook.webhook_id)));
    const ok = result.status !== undefined && result.status >= 200 && result.status < 300;
    const final = ok || !hook.enabled || attempts > this.o.retries;
    const outcome: WebhookDeliveryOutcome['outcome'] = ok ? 'delivered' : final ? 'failed' : 'retrying';
    const now = Date.now();
    const error = ok ? null : result.error ?? `answered ${result.status}`;
    const settled = await this.o.repo.settle(d.delivery_id, { holder: this.o.holder, leaseUntil }, { status: ok ? 'delivered' : final ? 'failed' : 'pending', attempts, nextAt: final ? d.next_at : now + this.o.retryDelayMs, error, now });
    if (!settled) {
      // Its lease ran out and another master took it: that master's outcome stands, not this stale one.
      this.o.logger.warn({ webhookId: hook.webhook_id, deliveryId: d.delivery_id, outcome }, 'webhook attempt outlived its lease; another master\'s attempt is the one recorded');
      return;
    }
    const last: WebhookDeliveryOutcome = { at: new Date(now).toISOString(), eventId: d.event_id, outcome, ...(result.status === undefined ? {} : { status: result.status }), ...(error ? { error } : {}) };
    await this.o.repo.setLastDelivery(hook.webhook_id, JSON.stringify(last));
    this.o.onOutcome?.(outcome);
    if (!ok) this.o.logger.info({ webhookId: hook.webhook_id, deliveryId: d.delivery_id, attempt: attempts, outcome, error }, 'webhook delivery not accepted');
  }

  /** One POST of the body, signed, to an address checked now and connected to as checked. */
  private async send(rawUrl: string, d: DeliveryDbRow, secret: string): Promise<{ status?: number; error?: string }> {
    let target: Awaited<ReturnType<WebhookTargets['check']>>;
    try {
      // The team's name server answers within the attempt's time too: a lookup that hung past the
      // lease let another master send the same delivery again.
      target = await withDeadline(this.o.targets.check(rawUrl), this.o.timeoutMs, () => new Error(`the url's host was not resolved within ${this.o.timeoutMs} ms`));
    } catch (err) {
      return { error: (err as Error).message };
    }
    const address = target.addresses[0]!;
    const headers = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(d.body)),
      'user-agent': 'svc-webhooks/1',
      [WEBHOOK_HEADERS.webhookId]: d.webhook_id,
      [WEBHOOK_HEADERS.deliveryId]: d.delivery_id,
      [WEBHOOK_HEADERS.signatureVersion]: 'v1',
      [WEBHOOK_HEADERS.signature]: webhookSignature(secret, d.body),
    };
    const lib = target.url.protocol === 'https:' ? https : http;
    return new Promise((resolve) => {
      const req = lib.request(target.url, {
        method: 'POST', headers,
        // The connection goes to the address checked, whatever the name resolves to by now.
        lookup: (_host, opts, cb) => {
          const family = isIP(address);
          if ((opts as { all?: boolean }).all) (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address, family }]);
          else cb(null, address, family);
        },
      }, (res) => {
        clearTimeout(timer);
        // The status is the answer: the body is drained, never kept.
        res.resume();
        res.on('error', () => { /* the status is already taken; a body cut short changes nothing */ });
        resolve({ status: res.statusCode });
      });
      // A whole-attempt limit: an endpoint that sends a byte now and then still runs out of time.
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${this.o.timeoutMs} ms`)), this.o.timeoutMs);
      req.on('error', (err) => { clearTimeout(timer); resolve({ error: err.message }); });
      req.end(d.body);
    });
  }
}
