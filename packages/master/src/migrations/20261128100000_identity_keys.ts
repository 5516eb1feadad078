import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261128100000_identity_keys',
  steps: [
    {
      op: 'createTable', table: 't_svc_identity_key', columns: [
        { name: 'kid', type: 'id', primaryKey: true },
        { name: 'private_key_sealed', type: 'text' },
        { name: 'created_at', type: 'bigint' },
        { name: 'active_from', type: 'bigint' },
      ],
    },
  ],
};
