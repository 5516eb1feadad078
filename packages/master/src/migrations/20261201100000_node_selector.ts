import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261201100000_node_selector',
  steps: [
    // JSON of the create's nodeSelector; null: none. A move to another node keeps to it (docs/cluster.md).
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'node_selector', type: 'text', nullable: true } },
  ],
};
