import { DEFAULT_TEAM_ID } from '@svc/contracts/teams';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../db/connect.ts';
import { migrate } from '../../db/migrator.ts';
import { availableTestDatabases } from '../../db/test-databases.ts';
import { migrations } from '../../migrations/index.ts';
import { buildSnapshotsOnlyOf } from './artifacts.ts';

// A builder template's delete takes its builds' snapshots (results and step captures) with it,
// except those another template starts from or has a build of (docs/templates.md, "The build cache").
for (const tdb of availableTestDatabases()) {
  test(`build snapshots a template delete takes, on ${tdb.driver}`, { skip: tdb.skip }, async () => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const k = db.kysely;
      const now = Date.now();
      const template = (id: string, layer: string | null) => k.insertInto('t_svc_template').values({
        template_id: id, alias: id, source_kind: 'builder', source_image_ref: '', request_json: null, spec_hash: id, cpu_count: 1,
        memory_mb: 256, disk_size_mb: 1024, with_cube_ca: 0, latest_job_id: null, artifact_id: null, image_info: null, status: 'ready',
        error: null, legacy: 0, created_at: now, updated_at: now, layer_snapshot_id: layer,
      } as never).execute();
      const build = (id: string, templateId: string, snapshotId: string | null) => k.insertInto('t_svc_build').values({
        build_id: id, template_id: templateId, status: 'ready', cpu_count: 1, memory_mb: 256, spec: null, reason: null,
        snapshot_id: snapshotId, tags: null, team_id: DEFAULT_TEAM_ID, created_at: now, updated_at: now, finished_at: now,
      }).execute();
      const snapshot = (id: string, buildId: string) => k.insertInto('t_svc_snapshot').values({
        snapshot_id: id, team_id: DEFAULT_TEAM_ID, name: null, sandbox_id: 'sbx', template_id: 'base', artifact_id: 'art', layer_id: id, layer_sha256: 'a'.repeat(64),
        size_bytes: 1, node_id: 'n1', status: 'ready', purpose: 'build', cache_key: `key-${id}`, build_id: buildId, contents: 'filesystem',
        cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', created_at: now,
      }).execute();

      // Template a: two builds, each with a step capture and a result; template b's only build
      // ended on a's first step capture (a cache hit), and b starts from a's second result.
      await template('a', 'snap-a2');
      await build('build-a1', 'a', 'snap-a1');
      await build('build-a2', 'a', 'snap-a2');
      for (const [id, b] of [['step-a1', 'build-a1'], ['snap-a1', 'build-a1'], ['step-a2', 'build-a2'], ['snap-a2', 'build-a2']] as const) await snapshot(id, b);
      await template('b', 'step-a1');
      await build('build-b1', 'b', 'step-a1');

      assert.deepEqual((await buildSnapshotsOnlyOf(k, { template_id: 'a', layer_snapshot_id: 'snap-a2' })).sort(), ['snap-a1', 'snap-a2', 'step-a2']);
      assert.deepEqual(await buildSnapshotsOnlyOf(k, { template_id: 'b', layer_snapshot_id: 'step-a1' }), [], 'b made no capture and a still has a build of step-a1');
    } finally {
      await db.close();
      await made.drop();
    }
  });
}
