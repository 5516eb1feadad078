import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261207100000_snapshot_lease',
  steps: [
    // A pending capture's lease while its layer is copied (snapshots/lease.ts), apart from
    // created_at: renewing created_at moved a user's snapshot in its list and its keyset pages,
    // so users' captures went without one, and the pending sweep copied a long one a second time
    // under its own copy. Null: never renewed (the sweeps then go by created_at).
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'lease_at', type: 'bigint', nullable: true } },
  ],
};
