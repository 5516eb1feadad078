import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261205090000_mysql_long_json',
  steps: [
    // MySQL's `text` holds 65,535 bytes, less than the JSON of what a create may give (docs/api.md
    // "Limits": 512 KB of env vars, 64 KB of metadata before JSON escapes it, network lists and
    // rules, 32 mounts of 4 KB paths) or a build's steps: such a create started on its node, then
    // its insert failed ("Data too long") and it was discarded with a 503. Made mediumtext (16
    // MiB), nullability as the columns were made; SQLite's and PostgreSQL's text has no such limit.
    { op: 'mysqlModifyColumn', table: 't_svc_sandbox', column: { name: 'metadata', type: 'longtext' } },
    { op: 'mysqlModifyColumn', table: 't_svc_sandbox', column: { name: 'network', type: 'longtext' } },
    { op: 'mysqlModifyColumn', table: 't_svc_sandbox', column: { name: 'env_vars', type: 'longtext', nullable: true } },
    { op: 'mysqlModifyColumn', table: 't_svc_sandbox', column: { name: 'volume_mounts', type: 'longtext' } },
    // A snapshot keeps its sandbox's environment and mounts; a build snapshot, the build's ENV steps.
    { op: 'mysqlModifyColumn', table: 't_svc_snapshot', column: { name: 'env_vars', type: 'longtext' } },
    { op: 'mysqlModifyColumn', table: 't_svc_snapshot', column: { name: 'volume_mounts', type: 'longtext', nullable: true } },
    // Every lifecycle event carries the sandbox's metadata (sandbox_metadata); the event recorder
    // logged such an event as lost. t_svc_webhook_delivery.body was made mediumtext for it already.
    { op: 'mysqlModifyColumn', table: 't_svc_event', column: { name: 'event_data', type: 'longtext', nullable: true } },
    // A build's start request (up to 1,000 steps of 64 KB arguments): its start failed past 64 KB.
    { op: 'mysqlModifyColumn', table: 't_svc_build', column: { name: 'spec', type: 'longtext', nullable: true } },
  ],
};
