import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultConfig, MemoryCoordination, notFound, silentLogger, type SvcError } from '@svc/common';
import type { CreateSandboxInput } from '@svc/contracts/master';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import { SandboxRepo } from '../sandboxes/repo.ts';
import { SandboxService } from '../sandboxes/service.ts';
import type { TemplateResolver } from '../sandboxes/ports.ts';
import { SnapshotCatalog } from './catalog.ts';
import { SnapshotRepo } from './repo.ts';
import { SnapshotAwareResolver } from './resolver.ts';
import { SnapshotService } from './service.ts';

const templates: TemplateResolver = {
  async resolveForCreate(ref) {
    if (ref !== 'base') throw notFound(`template ${ref} not found`, 130404);
    return {
      templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envVars: { FROM_IMAGE: '1' },
      artifact: { artifactId: 'art-1', sha256: 'x', sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' },
    };
  },
  async idsFor(ref) { return [ref === 'base' ? 'tpl-base' : ref]; },
  async artifactRef(artifactId) { return { artifactId, sha256: 'x', sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' }; },
};

const input = (over: Partial<CreateSandboxInput> = {}): CreateSandboxInput => ({
  template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
  network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], ...over,
});

const statusOf = (p: Promise<unknown>) => p.then(() => 200, (e: SvcError) => e.status);

async function setup(dbCfg: Parameters<typeof openDatabase>[0]) {
  const db = await openDatabase(dbCfg);
  await migrate(db.kysely, db.driver, migrations);
  const [n1, n2] = [await new FakeNodeAgent().start(), await new FakeNodeAgent().start()];
  const nodes = new NodeRegistry(db.kysely);
  for (const [nodeId, node, memoryMB] of [['n1', n1, 8192], ['n2', n2, 16384]] as const) {
    await nodes.register({ nodeId, address: node.url, runtime: 'gvisor', pauseKinds: ['freeze', 'filesystem'], capacity: { cpuCount: 2, memoryMB }, pausedResourceReleaseRatio: 0, version: 't' });
  }
  const repo = new SnapshotRepo(db.kysely);
  const catalog = new SnapshotCatalog(repo, nodes, silentLogger());
  const sandboxes = new SandboxService({
    cfg: defaultConfig('/tmp/svc-test'), repo: new SandboxRepo(db.kysely, db.driver), nodes, templates: new SnapshotAwareResolver(templates, repo),
    coordination: new MemoryCoordination(), logger: silentLogger(), proxies: { purge: async () => {} },
  });
  const snapshots = new SnapshotService({ repo, sandboxes, nodes, templates, logger: silentLogger() });
  const nodeOf = (id: string) => (n1.sandboxes.has(id) ? n1 : n2);
  return { db, n1, n2, nodeOf, sandboxes, snapshots, catalog, async close() { await n1.close(); await n2.close(); await db.close(); } };
}

for (const tdb of availableTestDatabases()) {
  test(`snapshots and forks on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    try {
      const origin = await h.sandboxes.create(input({ envVars: { MINE: 'yes' }, metadata: { app: 'a' } }));
      const originNode = h.nodeOf(origin.sandboxId);

      await t.test('a snapshot is captured on the sandbox\'s node and recorded; creates from it start there from its layer, with its environment', async () => {
        const snap = await h.snapshots.create(origin.sandboxId, { name: 'first' });
        assert.equal(snap.name, 'first');
        assert.match(snap.snapshotId, /^snap-[a-z0-9]{16}$/);
        assert.deepEqual([snap.sandboxId, snap.templateId, snap.contents, snap.nodeId], [origin.sandboxId, 'tpl-base', 'filesystem', origin.nodeId]);
        for (const ref of [snap.snapshotId, 'first']) {
          const child = await h.sandboxes.create(input({ template: ref }));
          assert.equal(child.nodeId, origin.nodeId, 'on the node that keeps the layer, though the other has more room');
          assert.equal(child.templateId, 'tpl-base');
          assert.ok(originNode.calls.includes(`create ${child.sandboxId}`));
          const row = await h.db.kysely.selectFrom('t_svc_sandbox').select('env_vars').where('sandbox_id', '=', child.sandboxId).executeTakeFirstOrThrow();
          assert.deepEqual(JSON.parse(row.env_vars!), { FROM_IMAGE: '1', MINE: 'yes' });
        }
      });

      await t.test('a name moves to the newest snapshot given it; list pages newest first and filters by sandbox and by name', async () => {
        const second = await h.snapshots.create(origin.sandboxId, { name: 'first' });
        const other = await h.sandboxes.create(input());
        await h.snapshots.create(other.sandboxId, {});
        const p1 = await h.catalog.list({ limit: 2 });
        assert.equal(p1.snapshots.length, 2);
        assert.equal(p1.snapshots[0].sandboxId, other.sandboxId, 'newest first');
        const p2 = await h.catalog.list({ limit: 2, nextToken: p1.nextToken });
        assert.equal(p2.snapshots.length, 1);
        assert.equal(p2.nextToken, undefined);
        assert.equal((await h.catalog.list({ sandboxId: origin.sandboxId })).snapshots.length, 2);
        assert.deepEqual((await h.catalog.list({ name: 'first' })).snapshots.map((s) => s.snapshotId), [second.snapshotId]);
        assert.equal((await h.catalog.list({ sandboxId: origin.sandboxId })).snapshots.filter((s) => s.name === 'first').length, 1);
        assert.equal(await statusOf(h.catalog.list({ nextToken: 'garbage' })), 400);
        assert.equal(await statusOf(h.catalog.list({ limit: 0 })), 400);
      });

      await t.test('bad input: names, a template\'s name, a paused or unknown sandbox', async () => {
        const taken = (await h.catalog.list({ limit: 1 })).snapshots[0].snapshotId;
        for (const name of ['has space', 'a/b', '-lead', 'x'.repeat(129), taken, 'base']) {
          assert.equal(await statusOf(h.snapshots.create(origin.sandboxId, { name })), 400, name);
        }
        assert.equal((await h.snapshots.create(origin.sandboxId, { name: 'snap-named' })).name, 'snap-named', 'a name may look like an id (E2B\'s own tests use snap-<id>)');
        assert.equal(await statusOf(h.snapshots.create('inope', {})), 404);
        const paused = await h.sandboxes.create(input());
        await h.sandboxes.pause(paused.sandboxId);
        assert.equal(await statusOf(h.snapshots.create(paused.sandboxId, {})), 409);
        assert.equal(await statusOf(h.snapshots.fork(paused.sandboxId, {})), 409);
      });

      await t.test('delete: its layer goes from its node; a create from it is then a 404; deleting again is a 404', async () => {
        const snap = await h.snapshots.create(origin.sandboxId, {});
        const layers = () => [...originNode.layers.keys()];
        assert.ok(layers().includes(snap.snapshotId));
        await h.catalog.delete(snap.snapshotId);
        assert.ok(!layers().includes(snap.snapshotId));
        assert.equal(await statusOf(h.sandboxes.create(input({ template: snap.snapshotId }))), 404);
        assert.equal(await statusOf(h.catalog.delete(snap.snapshotId)), 404);
        assert.equal(await h.catalog.deleteIfSnapshot('nothing-here'), false);
      });

      await t.test('fork: N sandboxes from one capture with the origin\'s settings; the capture is dropped; count is checked', async () => {
        const before = originNode.calls.filter((c) => c.startsWith('snapshot ')).length;
        const forks = await h.snapshots.fork(origin.sandboxId, { count: 3, timeout: 60 });
        assert.equal(forks.length, 3);
        for (const f of forks) {
          assert.ok(f.sandbox, JSON.stringify(f));
          assert.deepEqual([f.sandbox.nodeId, f.sandbox.metadata, f.sandbox.timeout], [origin.nodeId, { app: 'a' }, 60]);
        }
        assert.equal(originNode.calls.filter((c) => c.startsWith('snapshot ')).length, before + 1, 'one capture for all');
        assert.ok(![...originNode.layers.keys()].some((l) => l.startsWith('fork-')), 'the fork\'s capture is gone');
        for (const count of [0, 11, 1.5]) assert.equal(await statusOf(h.snapshots.fork(origin.sandboxId, { count })), 400);
        assert.equal(await statusOf(h.snapshots.fork('inope', {})), 404);
      });

      await t.test('a fork whose creates fail reports each failure and still drops its capture', async () => {
        originNode.behaviour.failCreate = true;
        try {
          const forks = await h.snapshots.fork(origin.sandboxId, { count: 2 });
          assert.deepEqual(forks.map((f) => f.error?.code), [500, 500]);
          assert.ok(![...originNode.layers.keys()].some((l) => l.startsWith('fork-')));
        } finally {
          originNode.behaviour.failCreate = false;
        }
      });

      await t.test('the sweep removes layers no snapshot names once they are old enough', async () => {
        const stray = { layerId: 'stray-layer', sha256: 'a'.repeat(64), sizeBytes: 1, artifactId: 'art-1', sandboxId: origin.sandboxId, contents: 'filesystem' as const };
        originNode.layers.set('stray-layer', { ...stray, createdAt: new Date(Date.now() - 3600_000).toISOString() });
        originNode.layers.set('young-layer', { ...stray, layerId: 'young-layer', createdAt: new Date().toISOString() });
        assert.deepEqual(await h.catalog.sweepOrphanLayers(), ['stray-layer']);
        assert.ok(originNode.layers.has('young-layer'), 'a capture under way is left alone');
        assert.ok([...originNode.layers.keys()].some((l) => l.startsWith('snap-')), 'recorded snapshots stay');
      });

      await t.test('filesystem pause: the node is asked for it; a resume gives the sandbox its environment and token again; traffic does not resume it', async () => {
        const s = await h.sandboxes.create(input({ envVars: { E: '1' }, secure: true }));
        const node = h.nodeOf(s.sandboxId);
        const paused = await h.sandboxes.pause(s.sandboxId, 'api', { memory: false });
        assert.equal(paused.pauseKind, 'filesystem');
        assert.equal(await statusOf(h.sandboxes.resumeForTraffic(s.sandboxId, 'auto')), 409);
        const r = await h.sandboxes.connect(s.sandboxId, undefined);
        assert.equal(r.resumed, true);
        assert.ok(node.calls.includes(`resume ${s.sandboxId} with identity`));
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
