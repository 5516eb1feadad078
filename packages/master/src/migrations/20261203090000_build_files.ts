import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261203090000_build_files',
  steps: [
    {
      // A team's uploaded context files (E2B's COPY) and when a build last asked for them, so that
      // files no build used for master.build_files_keep_days leave the store (docs/templates.md,
      // "Copying files"). The id is the store's (context-files.ts artifactIdOf).
      op: 'createTable', table: 't_svc_build_file', columns: [
        { name: 'artifact_id', type: 'id', primaryKey: true },
        { name: 'team_id', type: 'id' },
        { name: 'files_hash', type: 'string' },
        { name: 'size_bytes', type: 'bigint' },
        { name: 'created_at', type: 'bigint' },
        { name: 'used_at', type: 'bigint' },
      ],
    },
    { op: 'createIndex', table: 't_svc_build_file', name: 'i_svc_build_file_used', columns: ['used_at'] },
  ],
};
