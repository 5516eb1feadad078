import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261126110000_template_builds',
  steps: [
    // E2B's template builder (docs/templates.md, "The builder"): builds and their log lines.
    {
      op: 'createTable', table: 't_svc_build', columns: [
        { name: 'build_id', type: 'id', primaryKey: true },
        { name: 'template_id', type: 'id' },
        { name: 'status', type: 'string' },
        { name: 'cpu_count', type: 'int' },
        { name: 'memory_mb', type: 'int' },
        { name: 'spec', type: 'text', nullable: true },
        { name: 'reason', type: 'text', nullable: true },
        { name: 'snapshot_id', type: 'id', nullable: true },
        { name: 'created_at', type: 'bigint' },
        { name: 'updated_at', type: 'bigint' },
        { name: 'finished_at', type: 'bigint', nullable: true },
      ],
    },
    { op: 'createIndex', table: 't_svc_build', name: 'i_svc_build_template', columns: ['template_id'] },
    {
      op: 'createTable', table: 't_svc_build_log', primaryKey: ['build_id', 'seq'], columns: [
        { name: 'build_id', type: 'id' },
        { name: 'seq', type: 'int' },
        { name: 'at', type: 'bigint' },
        { name: 'level', type: 'string' },
        { name: 'message', type: 'text' },
      ],
    },
    // A template the builder made starts from a captured layer (a snapshot of purpose 'build').
    { op: 'addColumn', table: 't_svc_template', column: { name: 'layer_snapshot_id', type: 'id', nullable: true } },
    { op: 'addColumn', table: 't_svc_template', column: { name: 'start_cmd', type: 'text', nullable: true } },
    { op: 'addColumn', table: 't_svc_template', column: { name: 'ready_cmd', type: 'text', nullable: true } },
    // Snapshots a build made are not the user's: not listed, reused by the build cache (cache_key).
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'purpose', type: 'string', default: 'snapshot' } },
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'cache_key', type: 'string', nullable: true } },
    { op: 'createIndex', table: 't_svc_snapshot', name: 'i_svc_snapshot_cache_key', columns: ['cache_key'] },
  ],
};
