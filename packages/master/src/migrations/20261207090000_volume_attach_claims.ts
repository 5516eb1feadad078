import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261207090000_volume_attach_claims',
  steps: [
    // Creates, resumes, moves and content calls between reading the volume and their node's
    // attach (docs/volumes.md, "Lifecycle and counts"): a DELETE that marked the volume refuses
    // while any is under way, as it refuses while a node holds it. Counted on the row itself, so
    // that a claim and a mark are each one conditional update and the engine orders the two.
    { op: 'addColumn', table: 't_svc_volume', column: { name: 'attach_claims', type: 'int', default: 0 } },
    // Until when the claims count (epoch ms): those of a master that died mid-create lapse then.
    { op: 'addColumn', table: 't_svc_volume', column: { name: 'attach_claims_until', type: 'bigint', nullable: true } },
  ],
};
