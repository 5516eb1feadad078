import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261125130000_pause_memory',
  steps: [
    // 0: the idle-timeout pause drops the memory and keeps the files (E2B's autoPauseMemory false).
    { op: 'addColumn', table: 't_svc_sandbox', column: { name: 'auto_pause_memory', type: 'int', default: 1 } },
  ],
};
