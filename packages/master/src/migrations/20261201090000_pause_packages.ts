import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261201090000_pause_packages',
  steps: [
    // The paused sandbox's state copied into the artifact store (a t_svc_snapshot row of purpose
    // 'pause'), from which another node resumes it when its own is lost or drained (docs/cluster.md).
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'pause_snapshot_id', type: 'string', nullable: true } },
  ],
};
