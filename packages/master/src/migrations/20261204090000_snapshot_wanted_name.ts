import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261204090000_snapshot_wanted_name',
  steps: [
    // The name a capture asked for, kept while it is pending: the master's sweep that finishes a
    // capture a stopped master left gives it that name, as the capture would have (docs/snapshots.md).
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'wanted_name', type: 'text', nullable: true } },
  ],
};
