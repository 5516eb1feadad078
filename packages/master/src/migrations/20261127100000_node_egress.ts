import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261127100000_node_egress',
  steps: [
    // Where the master sends the egress policies of a node's sandboxes (docs/egress.md); null: the node has no egress proxy.
    { op: 'addColumn', table: 't_svc_node', column: { name: 'egress_admin_url', type: 'text', nullable: true } },
  ],
};
