import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261128110000_secrets',
  steps: [
    {
      op: 'createTable', table: 't_svc_secret', columns: [
        { name: 'secret_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'name', type: 'string' },
        { name: 'metadata', type: 'text' },
        { name: 'current_version', type: 'int' },
        { name: 'created_at', type: 'bigint' },
        { name: 'updated_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_secret', name: 'u_svc_secret_team_name', columns: ['team_id', 'name'], unique: true },
    { op: 'createIndex', table: 't_svc_secret', name: 'i_svc_secret_team_created', columns: ['team_id', 'created_at', 'secret_id'] },
    {
      op: 'createTable', table: 't_svc_secret_version', primaryKey: ['secret_id', 'version'], columns: [
        { name: 'secret_id', type: 'id' },
        { name: 'version', type: 'int' },
        { name: 'sealed_value', type: 'longtext' },
        { name: 'created_at', type: 'bigint' },
      ],
    },
  ],
};
