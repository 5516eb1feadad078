import { randomUUID } from 'node:crypto';
import type { Logger } from '@svc/common';
import type { SandboxEventData, SandboxEventType, WebhookDeliveryOutcome, WireSandboxEvent } from '@svc/contracts/events';
import type { SandboxRow } from '../db/schema.ts';
import type { EventRepo } from './event-repo.ts';
import { uuidv7 } from './ids.ts';
import type { DeliveryRow, EventRow } from './tables.ts';
import type { WebhookRepo } from './webhook-repo.ts';

/** The fields of a sandbox's row an event is made of. */
export type EventSubject = Pick<SandboxRow, 'sandbox_id' | 'team_id' | 'template_id' | 'cpu_count' | 'memory_mb' | 'metadata' | 'started_at'>;

const RUN_START: ReadonlySet<string> = new Set(['sandbox.lifecycle.created', 'sandbox.lifecycle.resumed']);
/** The events that end a run: they carry E2B's `execution`, the run's length and size. */
const RUN_END: ReadonlySet<string> = new Set(['sandbox.lifecycle.paused', 'sandbox.lifecycle.killed']);
/**
 * Deliveries a team may have waiting, over all its webhooks. Each holds the event's body (up to
 * 64 KB of metadata): without a cap, a team whose endpoints never answer grew the queue and the
 * database at its request rate, and held every master's send slots from other teams.
 */
const MAX_WAITING_DELIVERIES = 2_000;
/** How often a team whose deliveries are dropped is logged. */
const DROP_LOG_MS = 60_000;

/**
 * Records a sandbox's lifecycle events (docs/observability.md) and queues one delivery for each
 * enabled webhook of its team subscribed to the type, in the same transaction as the event: a
 * master that stops after the commit loses no delivery, and one that stops before it records
 * neither. A create or a resume starts a run (`sandboxExecutionId`); the events after it carry
 * that run's id, and a pause or kill that ends it carries its length.
 */
export class EventRecorder {
  private readonly dropLogged = new Map<string, number>();

  constructor(private readonly d: { events: EventRepo; webhooks: WebhookRepo; logger: Logger; onQueued?: () => void; maxWaiting?: number }) {}

  /**
   * Never throws: the change it records has been made, and a caller's answer must not say it
   * failed. A lost event is logged with the sandbox and the type.
   */
  async record(s: EventSubject, type: SandboxEventType, data: SandboxEventData = {}, opts: { buildId?: string } = {}): Promise<void> {
    try {
      await this.write(s, type, data, opts);
    } catch (err) {
      this.d.logger.error({ sandboxId: s.sandbox_id, type, err: (err as Error).message }, 'lifecycle event not recorded');
    }
  }

  private async write(s: EventSubject, type: SandboxEventType, data: SandboxEventData, opts: { buildId?: string }): Promise<void> {
    const now = Date.now();
    // The run this event belongs to; a create has none before it.
    const run = type === 'sandbox.lifecycle.created' ? undefined : await this.d.events.lastRunBound(s.sandbox_id);
    const runOpen = run !== undefined && RUN_START.has(run.type);
    const eventData: SandboxEventData = { ...data };
    if (RUN_END.has(type) && (runOpen || run === undefined)) {
      // A sandbox created before events were recorded: its run started when it did.
      const startedAt = run?.at ?? Number(s.started_at);
      eventData.execution = { started_at: new Date(startedAt).toISOString(), vcpu_count: s.cpu_count, memory_mb: s.memory_mb, execution_time: Math.max(0, now - startedAt) };
    }
    const metadata = parseMetadata(s.metadata);
    if (metadata) eventData.sandbox_metadata = metadata;
    const row: EventRow = {
      event_id: uuidv7(now), team_id: s.team_id, sandbox_id: s.sandbox_id, type,
      execution_id: RUN_START.has(type) ? randomUUID() : run?.execution_id ?? s.sandbox_id,
      build_id: opts.buildId ?? run?.build_id ?? s.template_id,
      template_id: s.template_id,
      event_data: Object.keys(eventData).length ? JSON.stringify(eventData) : null,
      at: now,
    };
    const body = JSON.stringify(toWireEvent(row));
    const enabled = await this.d.webhooks.enabledOf(s.team_id);
    let hooks = enabled.filter((w) => (JSON.parse(w.events) as string[]).includes(type));
    if (hooks.length) {
      const waiting = await this.d.webhooks.waitingOf(enabled.map((w) => w.webhook_id));
      const max = this.d.maxWaiting ?? MAX_WAITING_DELIVERIES;
      if (waiting + hooks.length > max) {
        await this.dropped(s.team_id, row.event_id, hooks.map((w) => w.webhook_id), waiting, max, now);
        hooks = [];
      }
    }
    const deliveries: DeliveryRow[] = hooks.map((w) => ({
      delivery_id: randomUUID(), webhook_id: w.webhook_id, event_id: row.event_id, body, status: 'pending', attempts: 0,
      next_at: now, lease_until: 0, lease_holder: null, last_error: null, created_at: now, done_at: null,
    }));
    await this.d.events.insert(row, deliveries);
    if (deliveries.length) this.d.onQueued?.();
  }

  /** The event is recorded and listed; its deliveries are not queued, and each webhook says so. */
  private async dropped(teamId: string, eventId: string, webhookIds: string[], waiting: number, max: number, now: number): Promise<void> {
    const error = `not queued: the team has ${waiting} deliveries waiting, and at most ${max} may wait (its endpoints answer too slowly or not at all); the event is listed in GET /events/sandboxes`;
    const outcome: WebhookDeliveryOutcome = { at: new Date(now).toISOString(), eventId, outcome: 'failed', error };
    for (const id of webhookIds) await this.d.webhooks.setLastDelivery(id, JSON.stringify(outcome));
    if ((this.dropLogged.get(teamId) ?? 0) + DROP_LOG_MS > now) return;
    if (this.dropLogged.size > 10_000) this.dropLogged.clear();
    this.dropLogged.set(teamId, now);
    this.d.logger.warn({ teamId, waiting, max }, 'webhook deliveries dropped: the team\'s queue is full (logged once a minute)');
  }
}

/** An event as E2B lists and delivers it. */
export function toWireEvent(r: EventRow): WireSandboxEvent {
  return {
    version: 'v1', id: r.event_id, type: r.type as SandboxEventType,
    eventData: r.event_data === null ? null : JSON.parse(r.event_data) as SandboxEventData,
    sandboxId: r.sandbox_id, sandboxExecutionId: r.execution_id, sandboxBuildId: r.build_id,
    sandboxTemplateId: r.template_id, sandboxTeamId: r.team_id, timestamp: new Date(Number(r.at)).toISOString(),
  };
}

function parseMetadata(json: string): Record<string, string> | undefined {
  const m = JSON.parse(json || '{}') as Record<string, string>;
  return Object.keys(m).length ? m : undefined;
}
