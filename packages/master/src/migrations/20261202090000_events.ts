import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261202090000_events',
  steps: [
    {
      // A sandbox's lifecycle events, kept events.retention_days (docs/observability.md). The
      // template and team are copied in: a terminated sandbox's row goes after a day, its events stay.
      op: 'createTable', table: 't_svc_event', columns: [
        { name: 'event_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'sandbox_id', type: 'id' },
        { name: 'type', type: 'string' },
        { name: 'execution_id', type: 'id' },
        { name: 'build_id', type: 'id' },
        { name: 'template_id', type: 'id' },
        { name: 'event_data', type: 'text', nullable: true },
        { name: 'at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_event', name: 'i_svc_event_team_at', columns: ['team_id', 'at', 'event_id'] },
    { op: 'createIndex', table: 't_svc_event', name: 'i_svc_event_sandbox_at', columns: ['sandbox_id', 'at', 'event_id'] },
    {
      op: 'createTable', table: 't_svc_webhook', columns: [
        { name: 'webhook_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'name', type: 'string' },
        { name: 'url', type: 'text' },
        { name: 'enabled', type: 'bool' },
        { name: 'events', type: 'text' },
        { name: 'sealed_secret', type: 'text' },
        { name: 'last_delivery', type: 'text', nullable: true },
        { name: 'created_at', type: 'bigint' },
        { name: 'updated_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_webhook', name: 'i_svc_webhook_team', columns: ['team_id', 'created_at'] },
    {
      // One row per (webhook, event) to deliver: the queue every master works from.
      op: 'createTable', table: 't_svc_webhook_delivery', columns: [
        { name: 'delivery_id', type: 'id', primaryKey: true },
        { name: 'webhook_id', type: 'id' },
        { name: 'event_id', type: 'id' },
        { name: 'body', type: 'longtext' },
        { name: 'status', type: 'string' },
        { name: 'attempts', type: 'int' },
        { name: 'next_at', type: 'bigint' },
        { name: 'lease_until', type: 'bigint' },
        { name: 'lease_holder', type: 'string', nullable: true },
        { name: 'last_error', type: 'text', nullable: true },
        { name: 'created_at', type: 'bigint' },
        { name: 'done_at', type: 'bigint', nullable: true },
      ],
    },
    { op: 'createIndex', table: 't_svc_webhook_delivery', name: 'i_svc_webhook_delivery_due', columns: ['status', 'next_at'] },
    { op: 'createIndex', table: 't_svc_webhook_delivery', name: 'i_svc_webhook_delivery_webhook', columns: ['webhook_id', 'status'] },
  ],
};
