import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261129100000_snapshot_volumes',
  steps: [
    // The sandbox's volume mounts (volume id, path, read-only), never their data (docs/volumes.md); null: none, or older.
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'volume_mounts', type: 'text', nullable: true } },
  ],
};
