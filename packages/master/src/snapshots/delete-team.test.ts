import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHttpApp, silentLogger } from '@svc/common';
import { TEAM_HEADER } from '@svc/contracts/teams';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import { masterOwnedRoutes } from '../teams/guards.ts';
import { guardOwnedRoutes } from '../teams/ownership.ts';
import { SnapshotCatalog } from './catalog.ts';
import { SnapshotRepo } from './repo.ts';
import { registerSnapshotRoutes } from './routes.ts';
import type { SnapshotService } from './service.ts';

const row = (id: string, team: string) => ({
  snapshot_id: id, sandbox_id: 'sb', template_id: 't', artifact_id: 'a', layer_id: id, layer_sha256: 'x', size_bytes: 1, node_id: 'n1',
  contents: 'filesystem', cpu_count: 1, memory_mb: 1, disk_size_mb: 1, env_vars: '{}', created_at: Date.now(), purpose: 'snapshot' as const,
  cache_key: null, build_id: null, team_id: team, volume_mounts: null,
});

for (const tdb of availableTestDatabases()) {
  test(`a snapshot deleted by name is the caller's team's only, on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const repo = new SnapshotRepo(db.kysely);
      const nodes = { async client() { return { async deleteLayer() {} }; }, async liveNodeIds() { return ['n1']; } } as unknown as NodeRegistry;
      const catalog = new SnapshotCatalog(repo, nodes, { async put() {}, async delete() {}, downloadUrl: () => '' }, silentLogger());

      await t.test('another team\'s capture that takes the name between the ownership check and the delete is not deleted (404)', async () => {
        const app = createHttpApp({ logger: silentLogger() });
        guardOwnedRoutes(app, masterOwnedRoutes({
          sandbox: async () => undefined,
          snapshot: async (ref) => {
            const s = await repo.resolve(ref);
            // Team B's capture stores its layer and takes the name "prod" right now.
            await repo.insertPending(row('snap-bbbbbbbbbbbbbbbb', 'team-b'));
            await repo.markReady('snap-bbbbbbbbbbbbbbbb', { name: 'prod', teamId: 'team-b' });
            return s && { teamId: s.team_id };
          },
          template: async () => undefined, job: async () => undefined,
        }));
        registerSnapshotRoutes(app, {} as SnapshotService, catalog);
        const r = await app.inject({ method: 'DELETE', url: '/v1/snapshots/prod', headers: { [TEAM_HEADER]: 'team-a' } });
        assert.equal(r.statusCode, 404, r.body);
        assert.equal((await repo.get('snap-bbbbbbbbbbbbbbbb'))?.name, 'prod', 'team B\'s snapshot stays');
        await app.close();
      });

      await t.test('E2B\'s DELETE /templates/{id} path (deleteIfSnapshot) keeps to the caller\'s team too; the operator deletes any', async () => {
        assert.equal(await catalog.deleteIfSnapshot('prod', 'team-a'), false);
        assert.equal(await catalog.deleteIfSnapshot('snap-bbbbbbbbbbbbbbbb', 'team-a'), false);
        assert.ok(await repo.get('snap-bbbbbbbbbbbbbbbb'));
        assert.equal(await catalog.deleteIfSnapshot('prod', 'team-b'), true);
        await repo.insertPending(row('snap-cccccccccccccccc', 'team-c'));
        await repo.markReady('snap-cccccccccccccccc', { name: 'ops', teamId: 'team-c' });
        await catalog.delete('ops');
        assert.equal(await repo.get('snap-cccccccccccccccc'), undefined);
      });
    } finally {
      await db.close();
      await made.drop();
    }
  });
}
