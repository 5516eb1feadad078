import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261125120000_snapshots',
  steps: [
    {
      op: 'createTable', table: 't_svc_snapshot', columns: [
        { name: 'snapshot_id', type: 'id', primaryKey: true },
        { name: 'name', type: 'string', nullable: true },
        { name: 'sandbox_id', type: 'id' },
        { name: 'template_id', type: 'id' },
        { name: 'artifact_id', type: 'id' },
        { name: 'layer_id', type: 'id' },
        { name: 'layer_sha256', type: 'string' },
        { name: 'size_bytes', type: 'bigint' },
        { name: 'node_id', type: 'id' },
        { name: 'contents', type: 'string' },
        { name: 'cpu_count', type: 'int' },
        { name: 'memory_mb', type: 'int' },
        { name: 'disk_size_mb', type: 'int' },
        { name: 'env_vars', type: 'text' },
        { name: 'created_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_snapshot', name: 'u_svc_snapshot_name', columns: ['name'], unique: true },
    { op: 'createIndex', table: 't_svc_snapshot', name: 'i_svc_snapshot_sandbox', columns: ['sandbox_id'] },
    { op: 'createIndex', table: 't_svc_snapshot', name: 'i_svc_snapshot_template', columns: ['template_id'] },
    { op: 'createIndex', table: 't_svc_snapshot', name: 'i_svc_snapshot_created', columns: ['created_at', 'snapshot_id'] },
    // A sandbox's environment as its create gave it (template's under the request's): snapshots keep it.
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'env_vars', type: 'text', nullable: true } },
  ],
};
