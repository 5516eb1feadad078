import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261130090000_runtimes',
  steps: [
    // JSON list of every runtime a node offers, its default first; null: an agent older than them (just `runtime`).
    { op: 'addColumn', table: 't_svc_node', column: { name: 'runtimes', type: 'text', nullable: true } },
    // The runtime a template's sandboxes run on when a create names none; null: the node's default (docs/runtimes.md).
    { op: 'addColumn', table: 't_svc_template', column: { name: 'runtime', type: 'text', nullable: true } },
  ],
};
