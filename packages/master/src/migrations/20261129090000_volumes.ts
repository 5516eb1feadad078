import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261129090000_volumes',
  steps: [
    {
      op: 'createTable', table: 't_svc_volume', columns: [
        { name: 'volume_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'name', type: 'string' },
        { name: 'driver', type: 'string' },
        { name: 'token', type: 'text' },
        { name: 'private_data', type: 'text' },
        // Nodes that hold the volume attached, moved by the flips node agents report (docs/volumes.md).
        { name: 'refcount', type: 'int' },
        { name: 'created_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_volume', name: 'u_svc_volume_team_name', columns: ['team_id', 'name'], unique: true },
    // What a node agent supports beyond the base protocol (JSON list; null: an agent older than volumes).
    { op: 'addColumn', table: 't_svc_node', column: { name: 'features', type: 'text', nullable: true } },
  ],
};
