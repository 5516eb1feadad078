import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { withDeadline, type Logger } from '@svc/common';
import { EVENT_LIMITS, WEBHOOK_HEADERS, webhookSignature, type WebhookDeliveryOutcome } from '@svc/contracts/events';
import type { Sealer } from '../vault/vault.ts';
import type { DeliveryDbRow, WebhookRepo } from './webhook-repo.ts';
import type { WebhookTargets } from './webhook-target.ts';
import { sealContext } from './webhooks.ts';
import { ATTEMPT_TIMEOUT_CODE, deliveryErrorClass } from './delivery-error.ts';

export interface DelivererOptions {
  repo: WebhookRepo;
  targets: WebhookTargets;
  vault: Sealer;
  logger: Logger;
  /** This master, in the leases it takes. */
  holder: string;
  /** How often the queue is read when no event of this master's wakes it (another master's events, retries). */
  pollMs?: number;
  /**
   * Attempts under way at once, and of one webhook: a slow endpoint holds only its own share.
   * One team holds at most a quarter of maxInFlight (at least 4), whatever its number of webhooks.
   */
  maxInFlight?: number;
  perWebhook?: number;
  retries?: number;
  retryDelayMs?: number;
  timeoutMs?: number;
  /** Told each attempt's outcome (the metrics count them). */
  onOutcome?: (outcome: WebhookDeliveryOutcome['outcome']) => void;
}

/** Reads of the queue in one pass, at most: each leaves out the teams that reached their share in the one before. */
const MAX_READS_PER_PASS = 8;

/**
 * Sends the queued deliveries (docs/observability.md, "Webhooks"). Every master runs one; a
 * delivery is taken by a lease written compare-and-set, so one master sends each attempt, and a
 * master that dies mid-attempt leaves a lease that expires for another to take. An attempt that
 * gets no 2xx within the timeout is retried `retries` times, `retryDelayMs` apart, as E2B does.
 * Attempts run side by side, at most `perWebhook` for one webhook and a quarter of them for one
 * team, so a dead endpoint, or a team's many webhooks at a tarpit, delays neither other teams'
 * deliveries nor the API.
 */
export class WebhookDeliverer {
  private readonly o: Required<Omit<DelivererOptions, 'onOutcome'>> & Pick<DelivererOptions, 'onOutcome'>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly perHook = new Map<string, number>();
  private readonly perTeam = new Map<string, number>();
  /** The attempts one team may hold at once on this master. */
  private readonly teamShare: number;
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(opts: DelivererOptions) {
    this.o = {
      pollMs: 1_000, maxInFlight: 64, perWebhook: 4, retries: EVENT_LIMITS.deliveryRetries,
      retryDelayMs: EVENT_LIMITS.deliveryRetryDelayMs, timeoutMs: EVENT_LIMITS.deliveryTimeoutMs, ...opts,
    };
    this.teamShare = Math.max(4, Math.floor(this.o.maxInFlight / 4));
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
   * Takes what is due, webhook by webhook, the one waiting longest first, up to each webhook's
   * and each team's share: a webhook with a long backlog (a dead endpoint) fills only its own
   * share, a team with many only the team's, and the others' deliveries are read past them.
   */
  private async pass(): Promise<void> {
    const now = Date.now();
    const skipHooks = new Set([...this.perHook].filter(([, n]) => n >= this.o.perWebhook).map(([id]) => id));
    const skipTeams = new Set([...this.perTeam].filter(([, n]) => n >= this.teamShare).map(([id]) => id));
    for (let read = 0; read < MAX_READS_PER_PASS; read++) {
      const room = this.o.maxInFlight - this.inFlight.size;
      if (room <= 0 || this.stopped) return;
      let passedOver = false;
      for (const { webhookId, teamId } of await this.o.repo.dueWebhooks(now, { webhooks: [...skipHooks], teams: [...skipTeams] }, room)) {
        if (this.stopped) return;
        if (skipTeams.has(teamId)) { passedOver = true; continue; }
        await this.take(webhookId, teamId, now);
        skipHooks.add(webhookId);
        if ((this.perTeam.get(teamId) ?? 0) >= this.teamShare) skipTeams.add(teamId);
      }
      // Read again only when a team reached its share in this read: its webhooks the read still
      // held may have hidden other teams' past the read's limit.
      if (!passedOver) return;
    }
  }

  /** Claims up to the webhook's, the team's and the master's room of one webhook's due deliveries. */
  private async take(webhookId: string, teamId: string, now: number): Promise<void> {
    const room = Math.min(this.o.perWebhook - (this.perHook.get(webhookId) ?? 0), this.teamShare - (this.perTeam.get(teamId) ?? 0), this.o.maxInFlight - this.inFlight.size);
    if (room <= 0) return;
    for (const d of await this.o.repo.due(webhookId, now, room)) {
      if (this.stopped) return;
      if (this.inFlight.has(d.delivery_id)) continue;
      // The lease outlasts the attempt: no other master takes it while this one may still send.
      const leaseUntil = now + this.o.timeoutMs + 30_000;
      if (!(await this.o.repo.claim(d, this.o.holder, leaseUntil))) continue;
      this.track(d, teamId, leaseUntil);
    }
  }

  private track(d: DeliveryDbRow, teamId: string, leaseUntil: number): void {
    bump(this.perHook, d.webhook_id, 1);
    bump(this.perTeam, teamId, 1);
    const attempt = this.attempt(d, leaseUntil)
      .catch((err: Error) => this.o.logger.error({ deliveryId: d.delivery_id, err: err.message }, 'webhook attempt not recorded; its lease expires and it is tried again'))
      .finally(() => {
        this.inFlight.delete(d.delivery_id);
        bump(this.perHook, d.webhook_id, -1);
        bump(this.perTeam, teamId, -1);
        this.kick();
      });
    this.inFlight.set(d.delivery_id, attempt);
  }

  private async attempt(d: DeliveryDbRow, leaseUntil: number): Promise<void> {
    const hook = await this.o.repo.byId(d.webhook_id);
    // Deleted with its queue; a delivery read just before is dropped here.
    if (!hook) return;
    const attempts = d.attempts + 1;
    let result: AttemptResult;
    const secret = hook.enabled ? this.secretOf(hook.webhook_id, hook.sealed_secret) : undefined;
    if (!hook.enabled) result = { error: 'the webhook is disabled' };
    // Retried as any failure, counted: during a rolling key rotation another master may hold the
    // key this one lacks (docs/security.md, "The vault key"); after the retries it fails and says why.
    else if (secret === undefined) result = { error: 'the signature secret cannot be opened (sealed under a vault key this master does not have); set a new signatureSecret' };
    else result = await this.send(hook.url, d, secret);
    const ok = result.status !== undefined && result.status >= 200 && result.status < 300;
    const final = ok || !hook.enabled || result.final === true || attempts > this.o.retries;
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
    if (!ok) this.o.logger.info({ webhookId: hook.webhook_id, deliveryId: d.delivery_id, attempt: attempts, outcome, error, ...(result.cause ? { cause: result.cause } : {}) }, 'webhook delivery not accepted');
  }

  /** The webhook's signature secret; undefined (logged) when the vault cannot open it. */
  private secretOf(webhookId: string, sealed: string): string | undefined {
    try {
      return this.o.vault.open(sealed, sealContext(webhookId));
    } catch (err) {
      this.o.logger.error({ webhookId, err: (err as Error).message }, 'a webhook\'s signature secret cannot be opened: its deliveries fail until the team sets a new one (docs/security.md, "The vault key")');
      return undefined;
    }
  }

  /** One POST of the body, signed, to an address checked now and connected to as checked. */
  private async send(rawUrl: string, d: DeliveryDbRow, secret: string): Promise<AttemptResult> {
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
      const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${this.o.timeoutMs} ms`), { code: ATTEMPT_TIMEOUT_CODE })), this.o.timeoutMs);
      // The team is told the class of the failure; the socket's message, with addresses and ports, is logged.
      req.on('error', (err: Error & { code?: string }) => { clearTimeout(timer); resolve({ error: deliveryErrorClass(err, this.o.timeoutMs), cause: err.message }); });
      req.end(d.body);
    });
  }
}

/** One attempt's outcome: the answer's status, or what failed (`cause`: the raw error, for the log); final: not to be retried. */
interface AttemptResult {
  status?: number;
  error?: string;
  cause?: string;
  final?: boolean;
}

function bump(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n); else counts.delete(key);
}
