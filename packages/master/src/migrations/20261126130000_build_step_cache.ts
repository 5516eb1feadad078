import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261126130000_build_step_cache',
  steps: [
    // The build that captured a build snapshot (its result or one of its steps' cache), so that the
    // step captures go when their template does (docs/templates.md, "The build cache").
    { op: 'addColumn', table: 't_svc_snapshot', column: { name: 'build_id', type: 'id', nullable: true } },
  ],
};
