import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261202100000_metrics_history',
  steps: [
    {
      // A sample of a running sandbox every 5 s, from its node (docs/observability.md).
      op: 'createTable', table: 't_svc_sandbox_metric', primaryKey: ['sandbox_id', 'at'], columns: [
        { name: 'sandbox_id', type: 'id' },
        { name: 'team_id', type: 'id' },
        { name: 'at', type: 'bigint' },
        { name: 'cpu_count', type: 'int' },
        { name: 'cpu_used_pct', type: 'double' },
        { name: 'mem_used', type: 'bigint' },
        { name: 'mem_total', type: 'bigint' },
        { name: 'mem_cache', type: 'bigint' },
        { name: 'disk_used', type: 'bigint' },
        { name: 'disk_total', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_sandbox_metric', name: 'i_svc_sandbox_metric_at', columns: ['at'] },
    {
      op: 'createTable', table: 't_svc_team_metric', primaryKey: ['team_id', 'at'], columns: [
        { name: 'team_id', type: 'id' },
        { name: 'at', type: 'bigint' },
        { name: 'concurrent', type: 'int' },
        { name: 'starts', type: 'int' },
        { name: 'interval_ms', type: 'int' },
      ],
    },
    { op: 'createIndex', table: 't_svc_team_metric', name: 'i_svc_team_metric_at', columns: ['at'] },
    // The team sampler counts each interval's creates among all teams' events, and pruning goes by time.
    { op: 'createIndex', table: 't_svc_event', name: 'i_svc_event_at', columns: ['at'] },
  ],
};
