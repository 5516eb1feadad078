import type { Migration } from '../db/migrator.ts';

export const migration: Migration = {
  name: '20261126120000_template_tags',
  steps: [
    // E2B's template tags: a name for one build of a template (`name:tag`); `default` is the current one.
    {
      op: 'createTable', table: 't_svc_template_tag', primaryKey: ['template_id', 'tag'], columns: [
        { name: 'template_id', type: 'id' },
        { name: 'tag', type: 'id' },
        { name: 'build_id', type: 'id' },
        { name: 'created_at', type: 'bigint' },
      ],
    },
    // The tags a build asked for (JSON list), given to it once it is ready.
    { op: 'addColumn', table: 't_svc_build', column: { name: 'tags', type: 'text', nullable: true } },
  ],
};
