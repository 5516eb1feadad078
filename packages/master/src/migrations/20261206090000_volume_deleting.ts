import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261206090000_volume_deleting',
  steps: [
    // When a DELETE of the volume began (epoch ms); null: usable. Set before the plugin's Destroy
    // and kept when it fails, so that no create, resume or content call hands out a volume whose
    // data is being deleted (docs/volumes.md, "Lifecycle and counts"). A nullable bigint: the
    // same on SQLite, PostgreSQL and MySQL, and existing rows read as usable.
    { op: 'addColumn', table: 't_svc_volume', column: { name: 'deleting_at', type: 'bigint', nullable: true } },
  ],
};
