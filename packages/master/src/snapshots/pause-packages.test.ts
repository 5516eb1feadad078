import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { silentLogger, type SvcError } from '@svc/common';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import type { NodeRegistry } from '../nodes/registry.ts';
import { SnapshotCatalog } from './catalog.ts';
import { PausePackageStore } from './pause-packages.ts';
import { SnapshotRepo } from './repo.ts';
import { SnapshotService } from './service.ts';
import type { SnapshotRow } from './tables.ts';

/** A node that captures at once and an artifact store whose copy waits until released. */
function fakes() {
  const archived: string[] = [];
  const node = {
    async snapshotSandbox(_id: string, o: { layerId: string }) { return { layerId: o.layerId, artifactId: 'art', sha256: 'a'.repeat(64), sizeBytes: 3, contents: 'memory', createdAt: new Date().toISOString() }; },
    async layerArchive(layerId: string) { archived.push(layerId); return Object.assign(Readable.from([Buffer.from('abc')]), { statusCode: 200 }); },
    async deleteLayer() {},
    async listLayers() { return []; },
  };
  const nodes = { async client() { return node; }, async liveNodeIds() { return ['n1']; } } as unknown as NodeRegistry;
  const stored = new Set<string>();
  let release: (() => void) | undefined;
  const storage = {
    /** While held, a put waits for release(). */
    hold: false,
    async put(id: string) {
      if (storage.hold) await new Promise<void>((r) => { release = r; });
      stored.add(id);
    },
    async delete(id: string) { stored.delete(id); },
    downloadUrl: (id: string) => `/internal/v1/layers/${id}`,
  };
  return { nodes, storage, stored, archived, release: () => release?.() };
}

/** A snapshot service whose captures copy into a held store, its lease renewed every 20 ms, and the catalog whose sweeps race it. */
async function captureFixture(repo: SnapshotRepo) {
  const f = fakes();
  const catalog = new SnapshotCatalog(repo, f.nodes, f.storage, silentLogger());
  const node = await f.nodes.client('n1');
  const sandboxes = {
    async snapshotSource() {
      return { node, envVars: {}, volumeMounts: [], record: { teamId: 'team-a', templateId: 't', nodeId: 'n1', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024 } };
    },
  };
  const service = new SnapshotService({ repo, sandboxes: sandboxes as never, nodes: f.nodes, templates: {} as never, storage: f.storage, catalog, logger: silentLogger(), leaseRenewMs: 20 });
  return { f, catalog, service };
}

const pause = { sandboxId: 'sb-1', nodeId: 'n1', templateId: 't', teamId: 'team-a', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024 };
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const tdb of availableTestDatabases()) {
  test(`pause packages and pending captures on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const db = await openDatabase(made.config);
    try {
      await migrate(db.kysely, db.driver, migrations);
      const repo = new SnapshotRepo(db.kysely);
      /** The package the first case stores, which its sandbox then names. */
      let kept = '';

      await t.test('a package still being copied keeps its lease: the stale sweep leaves it, and it is stored whole', async () => {
        const f = fakes();
        const catalog = new SnapshotCatalog(repo, f.nodes, f.storage, silentLogger());
        const pkgs = new PausePackageStore(repo, f.nodes, f.storage, catalog, silentLogger(), 20);
        f.storage.hold = true;
        const storing = pkgs.store(pause);
        // The copy has run for longer than the sweep's age; the sandbox names no package yet (it is pausing).
        await wait(300);
        assert.deepEqual(await pkgs.sweepStale(async () => null, 150), []);
        f.release();
        const res = await storing;
        kept = res.snapshotId;
        assert.equal((await repo.get(res.snapshotId))?.status, 'ready');
        assert.ok(f.stored.has(res.snapshotId));
      });

      await t.test('a package whose row was dropped under its copy is not kept: the stored copy is removed and the pause says so', async () => {
        const f = fakes();
        const catalog = new SnapshotCatalog(repo, f.nodes, f.storage, silentLogger());
        const pkgs = new PausePackageStore(repo, f.nodes, f.storage, catalog, silentLogger(), 60_000);
        f.storage.hold = true;
        const storing = pkgs.store({ ...pause, sandboxId: 'sb-3' });
        await wait(50);
        // Another master's sweep (its clock far ahead) took the row.
        assert.equal((await pkgs.sweepStale(async (sandboxId) => (sandboxId === 'sb-1' ? kept : null), -3_600_000)).length, 1);
        f.release();
        await assert.rejects(storing, (e: SvcError) => e.status === 503 && /could not be stored/.test(e.message));
        assert.deepEqual([...f.stored], [], 'nothing left in the store with no row naming it');
        assert.equal((await repo.get(kept))?.status, 'ready', 'the package its sandbox names stays');
      });

      await t.test('a build\'s capture still being copied keeps its lease: the pending sweep leaves it to its own copy', async () => {
        const { f, catalog, service } = await captureFixture(repo);
        f.storage.hold = true;
        const capturing = service.capture('sb-4', { purpose: 'build', cacheKey: 'k', buildId: 'b1', envVars: {} });
        // Its copy has run for longer than the sweep's age.
        await wait(300);
        assert.deepEqual(await catalog.finishPending(150), { ready: [], removed: [] });
        f.release();
        const row = await capturing;
        assert.equal((await repo.get(row.snapshot_id))?.status, 'ready');
        assert.deepEqual(f.archived, [row.snapshot_id], 'copied once, by its own capture');
        await repo.delete(row.snapshot_id);
      });

      await t.test('a user\'s snapshot still being copied keeps its lease apart from its creation time: the pending sweep leaves it, and it lists as taken when it was', async () => {
        const { f, catalog, service } = await captureFixture(repo);
        f.storage.hold = true;
        const before = Date.now();
        const capturing = service.capture('sb-5', { purpose: 'snapshot', name: 'long-copy' });
        // Its copy has run for longer than the sweep's age.
        await wait(300);
        assert.deepEqual(await catalog.finishPending(150), { ready: [], removed: [] });
        f.release();
        const row = await capturing;
        const kept = await repo.get(row.snapshot_id);
        assert.equal(kept?.status, 'ready');
        assert.equal(kept?.name, 'long-copy');
        assert.deepEqual(f.archived, [row.snapshot_id], 'copied once, by its own capture');
        assert.ok(Number(kept!.created_at) >= before && Number(kept!.created_at) < before + 150, `created when taken, not moved by its lease (${Number(kept!.created_at) - before} ms after the capture began)`);
        assert.ok(Number(kept!.lease_at) >= before + 150, 'the lease was renewed while it copied');
        await repo.delete(row.snapshot_id);
      });

      await t.test('the pending sweep finishes users\' and builds\' captures a stopped master left, never a pause package\'s', async () => {
        const f = fakes();
        const catalog = new SnapshotCatalog(repo, f.nodes, f.storage, silentLogger());
        const row = (id: string, purpose: SnapshotRow['purpose']) => ({
          snapshot_id: id, sandbox_id: 'sb-2', template_id: 't', artifact_id: 'art', layer_id: id, layer_sha256: 'a'.repeat(64), size_bytes: 3,
          node_id: 'n1', contents: 'filesystem', cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', created_at: Date.now() - 3_600_000,
          purpose, cache_key: null, build_id: null, team_id: 'team-a', volume_mounts: null,
        });
        for (const [id, purpose] of [['snap-user', 'snapshot'], ['pause-inflight', 'pause'], ['snap-build', 'build']] as const) await repo.insertPending(row(id, purpose));
        // A build's capture younger than the sweep's age may still be copying: it waits.
        await repo.insertPending({ ...row('snap-build-new', 'build'), created_at: Date.now() });
        const done = await catalog.finishPending(60_000);
        assert.deepEqual({ ready: [...done.ready].sort(), removed: done.removed }, { ready: ['snap-build', 'snap-user'], removed: [] });
        assert.deepEqual([...f.archived].sort(), ['snap-build', 'snap-user']);
        assert.ok(f.stored.has('snap-build'));
        const statuses = await db.kysely.selectFrom('t_svc_snapshot').select(['snapshot_id', 'status', 'name']).where('snapshot_id', 'in', ['pause-inflight', 'snap-build', 'snap-build-new']).orderBy('snapshot_id').execute();
        assert.deepEqual(statuses.map((r) => `${r.snapshot_id}:${r.status}:${r.name}`), ['pause-inflight:pending:null', 'snap-build:ready:null', 'snap-build-new:pending:null']);
      });
    } finally {
      await db.close();
      await made.drop();
    }
  });
}
