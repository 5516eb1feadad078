/**
 * The lifecycle events' and webhooks' tables (docs/observability.md). Times are epoch
 * milliseconds, booleans 0/1 (db/schema.ts).
 */
export interface EventRow {
  /** Time-ordered (uuid v7): two events of one millisecond list in the order they were made. */
  event_id: string;
  team_id: string;
  sandbox_id: string;
  /** sandbox.lifecycle.* */
  type: string;
  execution_id: string;
  build_id: string;
  template_id: string;
  /** JSON of SandboxEventData; null: none. */
  event_data: string | null;
  at: number;
}

export interface WebhookRow {
  webhook_id: string;
  team_id: string;
  name: string;
  url: string;
  enabled: number;
  /** JSON list of event types. */
  events: string;
  /** The signature secret, sealed by the vault with the context `webhook:<id>`. */
  sealed_secret: string;
  /** JSON of WebhookDeliveryOutcome; null: nothing delivered yet. */
  last_delivery: string | null;
  created_at: number;
  updated_at: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryRow {
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  /** The event's JSON exactly as POSTed and signed. */
  body: string;
  status: string;
  /** Attempts made so far. */
  attempts: number;
  /** When the next attempt is due. */
  next_at: number;
  /** A master delivering it holds it until then; another takes it over after (its master died). */
  lease_until: number;
  lease_holder: string | null;
  last_error: string | null;
  created_at: number;
  done_at: number | null;
}

export interface EventTables {
  t_svc_event: EventRow;
  t_svc_webhook: WebhookRow;
  t_svc_webhook_delivery: DeliveryRow;
}
