import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261126100000_snapshot_store',
  steps: [
    // 0: a snapshot is 'ready' once its layer is in the artifact store; until then 'pending'
    // (captured on its node only). Rows from before this are pending: the snapshot sweep
    // copies their layers into the store.
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'status', type: 'string', default: 'pending' } },
  ],
};
