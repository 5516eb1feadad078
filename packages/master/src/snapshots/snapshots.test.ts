import { test } from 'node:test';
import { DEFAULT_TEAM_ID, NO_LIMITS, type TeamLimits } from '@svc/contracts/teams';
import assert from 'node:assert/strict';
import { ErrorCodes, defaultConfig, freePort, MemoryCoordination, notFound, silentLogger, type SvcError } from '@svc/common';
import type { CreateSandboxInput } from '@svc/contracts/master';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import { SandboxRepo } from '../sandboxes/repo.ts';
import { NodeEgressPolicies } from '../egress-policies.ts';
import { MasterSandboxes } from '../sandboxes/service.ts';
import type { TemplateResolver } from '../sandboxes/ports.ts';
import { SnapshotCatalog } from './catalog.ts';
import { SnapshotRepo } from './repo.ts';
import { SnapshotAwareResolver } from './resolver.ts';
import { SnapshotService } from './service.ts';
import Fastify from 'fastify';
import { TemplateCenterClient } from '@svc/contracts/template-center';
import { NodeAgentClient } from '@svc/contracts/node-agent';
import { FakeTemplateCenter } from '../templates/testing/fake-template-center.ts';
import { TemplateCenterLayerStorage } from './layer-storage.ts';

const templates: TemplateResolver = {
  async resolveForCreate(ref) {
    if (ref !== 'base') throw notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);
    return {
      templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envVars: { FROM_IMAGE: '1' },
      artifact: { artifactId: 'art-1', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' },
    };
  },
  async idsFor(ref) { return [ref === 'base' ? 'tpl-base' : ref]; },
  async artifactRef(artifactId) { return { artifactId, sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' }; },
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
  // The artifact store (the fake template center) and the master's layer download route.
  const tc = await new FakeTemplateCenter('tok').start();
  const masterApp = Fastify();
  const masterPort = await freePort();
  const storage = new TemplateCenterLayerStorage(new TemplateCenterClient(tc.url, 'tok'), `http://127.0.0.1:${masterPort}`);
  storage.registerDownloadRoute(masterApp);
  await masterApp.listen({ host: '127.0.0.1', port: masterPort });
  const repo = new SnapshotRepo(db.kysely);
  const catalog = new SnapshotCatalog(repo, nodes, storage, silentLogger());
  // Every sandbox here is the default team's; a test sets its limits and puts them back.
  const limits: TeamLimits = { ...NO_LIMITS };
  const quotas = { limits: async () => limits };
  const sandboxRepo = new SandboxRepo(db.kysely, db.driver);
  const sandboxes = new MasterSandboxes({ quotas,
    cfg: defaultConfig('/tmp/svc-test'), repo: sandboxRepo, nodes, templates: new SnapshotAwareResolver(templates, repo, storage),
    coordination: new MemoryCoordination(), logger: silentLogger(), proxies: { purge: async () => {} }, egress: new NodeEgressPolicies(nodes, '', silentLogger()),
  });
  const snapshots = new SnapshotService({ repo, sandboxes, nodes, templates, storage, catalog, logger: silentLogger(), quotas });
  const nodeOf = (id: string) => (n1.sandboxes.has(id) ? n1 : n2);
  return {
    db, n1, n2, tc, nodes, nodeOf, repo, sandboxes, snapshots, catalog, limits, sandboxRepo,
    async close() {
      // The database closes whatever else fails: a pool left open is cut by the database's drop (PostgreSQL).
      try {
        await Promise.all([n1.close(), n2.close(), tc.close(), masterApp.close()]);
      } finally {
        await db.close();
      }
    },
  };
}

for (const tdb of availableTestDatabases()) {
  test(`snapshots and forks on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    try {
      const origin = await h.sandboxes.create(input({ envVars: { MINE: 'yes' }, metadata: { app: 'a' } }));
      const originNode = h.nodeOf(origin.sandboxId);
      // n2 says it is busy: sandboxes from a snapshot taken there are placed on n1, which must
      // download the layer.
      const big = await h.sandboxes.create(input({ envVars: { MINE: 'yes' } }));
      assert.equal(big.nodeId, 'n2');
      await h.nodes.heartbeat('n2', { sandboxes: { running: 2, paused: 0 }, usedMemoryMB: 12_000 });

      await t.test('a snapshot is captured on the sandbox\'s node and copied into the artifact store; a create from it runs on any node, which downloads the layer once, with its environment', async () => {
        const snap = await h.snapshots.create(big.sandboxId, { name: 'first' });
        assert.equal(snap.name, 'first');
        assert.match(snap.snapshotId, /^snap-[a-z0-9]{16}$/);
        assert.deepEqual([snap.sandboxId, snap.templateId, snap.contents, snap.nodeId], [big.sandboxId, 'tpl-base', 'filesystem', 'n2']);
        assert.deepEqual(h.tc.files.get(snap.snapshotId), h.n2.layerBytes.get(snap.snapshotId), 'the store holds the layer the node captured');
        for (const ref of [snap.snapshotId, 'first']) {
          const child = await h.sandboxes.create(input({ template: ref, memoryMB: 256 }));
          assert.equal(child.nodeId, 'n1', 'placed by room, not on the capturing node');
          assert.equal(child.templateId, 'tpl-base');
          const row = await h.db.kysely.selectFrom('t_svc_sandbox').select('env_vars').where('sandbox_id', '=', child.sandboxId).executeTakeFirstOrThrow();
          assert.deepEqual(JSON.parse(row.env_vars!), { FROM_IMAGE: '1', MINE: 'yes' });
        }
        assert.deepEqual(h.n1.calls.filter((c) => c.startsWith('download layer')), [`download layer ${snap.snapshotId}`], 'downloaded once, then kept');
        assert.deepEqual(h.n1.layerBytes.get(snap.snapshotId), h.n2.layerBytes.get(snap.snapshotId));
      });

      await t.test('a capture the store refuses is not kept anywhere: no record, no copy on its node; the store\'s 507 reaches the caller', async () => {
        const before = (await h.catalog.list({})).snapshots.length;
        h.tc.failLayerWith = 507;
        try {
          assert.equal(await statusOf(h.snapshots.create(origin.sandboxId, { name: 'too-big' })), 507);
        } finally {
          h.tc.failLayerWith = null;
        }
        assert.equal((await h.catalog.list({})).snapshots.length, before);
        assert.equal((await h.db.kysely.selectFrom('t_svc_snapshot').select('snapshot_id').where('status', '=', 'pending').execute()).length, 0);
        assert.ok(![...originNode.layers.keys()].some((l) => !h.tc.files.has(l) && l.startsWith('snap-')), 'no layer on the node without its stored copy');
      });

      await t.test('the pending sweep stores a capture a master stopped before storing, with the name it asked for, and drops one whose node lost the layer or whose name was taken', async () => {
        const layer = await new NodeAgentClient(originNode.url).snapshotSandbox(origin.sandboxId, { layerId: 'snap-crashedbefore0' });
        const row = (layerId: string) => ({
          snapshot_id: layerId, sandbox_id: origin.sandboxId, template_id: 'tpl-base', artifact_id: 'art-1', layer_id: layerId,
          layer_sha256: layer.sha256, size_bytes: layer.sizeBytes, node_id: origin.nodeId, contents: 'filesystem', cpu_count: 1, team_id: DEFAULT_TEAM_ID,
          memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', created_at: Date.now() - 3600_000, purpose: 'snapshot' as const, cache_key: null, build_id: null, volume_mounts: null,
        });
        await h.repo.insertPending({ ...row('snap-crashedbefore0'), wanted_name: 'saved-before-the-crash' });
        await h.repo.insertPending(row('snap-layergone00000'));
        await h.repo.insertPending({ ...row('snap-underway000000'), created_at: Date.now() });
        assert.deepEqual(await h.catalog.finishPending(), { ready: ['snap-crashedbefore0'], removed: ['snap-layergone00000'] });
        assert.equal((await h.catalog.list({ name: 'snap-crashedbefore0' })).snapshots.length, 1, 'listed once stored');
        assert.deepEqual((await h.catalog.list({ name: 'saved-before-the-crash' })).snapshots.map((s) => s.snapshotId), ['snap-crashedbefore0'], 'under the name the capture asked for (before 2026-11-30 it lost it)');
        // Another team took the name meanwhile: dropped with its layer, as the capture itself would have been.
        const other = await new NodeAgentClient(originNode.url).snapshotSandbox(origin.sandboxId, { layerId: 'snap-nametaken00000' });
        await h.repo.insertPending({ ...row('snap-nametaken00000'), layer_sha256: other.sha256, size_bytes: other.sizeBytes, team_id: 'team-late', wanted_name: 'saved-before-the-crash' });
        assert.deepEqual(await h.catalog.finishPending(), { ready: [], removed: ['snap-nametaken00000'] });
        assert.deepEqual((await h.catalog.list({ name: 'saved-before-the-crash' })).snapshots.map((s) => s.snapshotId), ['snap-crashedbefore0'], 'the holder keeps its name');
        assert.equal((await h.db.kysely.selectFrom('t_svc_snapshot').select('snapshot_id').where('snapshot_id', '=', 'snap-nametaken00000').execute()).length, 0);
        assert.ok(h.tc.files.has('snap-crashedbefore0'));
        assert.equal(await statusOf(h.catalog.delete('snap-underway000000')), 404, 'a capture under way is neither listed nor found');
        await h.catalog.delete('snap-crashedbefore0');
        await h.repo.delete('snap-underway000000');
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
        assert.equal((await h.catalog.list({ sandboxId: origin.sandboxId })).snapshots.length, 1);
        assert.deepEqual((await h.catalog.list({ name: 'first' })).snapshots.map((s) => s.snapshotId), [second.snapshotId]);
        assert.equal((await h.catalog.list({ sandboxId: origin.sandboxId })).snapshots.filter((s) => s.name === 'first').length, 1);
        assert.equal(await statusOf(h.catalog.list({ nextToken: 'garbage' })), 400);
        // Past a safe integer: PostgreSQL's bigint refused it with a 500.
        assert.equal(await statusOf(h.catalog.list({ nextToken: Buffer.from(`1${'0'.repeat(20)}:snap-abc`).toString('base64url') })), 400);
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

      await t.test('quotas: maxSnapshots before a capture and again once recorded (the newest of those taken together step back); maxKeptSandboxes counts paused sandboxes at a create', async () => {
        try {
          const kept = await h.repo.teamCount(DEFAULT_TEAM_ID);
          h.limits.maxSnapshots = kept + 2;
          const together = await Promise.allSettled(Array.from({ length: 4 }, () => h.snapshots.create(origin.sandboxId, {})));
          assert.deepEqual(together.map((o) => o.status).sort(), ['fulfilled', 'fulfilled', 'rejected', 'rejected']);
          for (const o of together) if (o.status === 'rejected') assert.deepEqual([(o.reason as SvcError).status, /maxSnapshots reached/.test((o.reason as SvcError).message)], [429, true]);
          assert.equal(await h.repo.teamCount(DEFAULT_TEAM_ID), kept + 2, 'those past the limit are not kept');
          const captures = originNode.calls.filter((c) => c.startsWith('snapshot ')).length;
          assert.equal(await statusOf(h.snapshots.create(origin.sandboxId, {})), 429);
          assert.equal(originNode.calls.filter((c) => c.startsWith('snapshot ')).length, captures, 'over the limit, nothing is captured');
          h.limits.maxSnapshots = 0;

          const usage = await h.sandboxRepo.teamUsage(DEFAULT_TEAM_ID);
          h.limits.maxKeptSandboxes = usage.kept + 1;
          const last = await h.sandboxes.create(input());
          await h.sandboxes.pause(last.sandboxId);
          const refused = await h.sandboxes.create(input()).then(() => undefined, (e: SvcError) => e);
          assert.equal(refused?.status, 429);
          assert.match(refused.message, /maxKeptSandboxes reached: the team may hold \d+ sandboxes running or paused/);
          assert.equal((await h.sandboxes.resume(last.sandboxId, undefined)).state, 'running', 'a resume adds nothing kept');
          await h.sandboxes.kill(last.sandboxId);
          await h.sandboxes.kill((await h.sandboxes.create(input())).sandboxId);
        } finally {
          Object.assign(h.limits, NO_LIMITS);
        }
      });

      await t.test('delete: its layer goes from the store and from every node with a copy; a create from it is then a 404; deleting again is a 404', async () => {
        const snap = await h.snapshots.create(big.sandboxId, {});
        assert.equal((await h.sandboxes.create(input({ template: snap.snapshotId, memoryMB: 256 }))).nodeId, 'n1');
        const copies = () => [h.n1, h.n2].filter((n) => n.layers.has(snap.snapshotId)).length + (h.tc.files.has(snap.snapshotId) ? 1 : 0);
        assert.equal(copies(), 3);
        await h.catalog.delete(snap.snapshotId);
        assert.equal(copies(), 0);
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

      await t.test('a fork by a team at its sandbox limit is the create\'s 429 before anything is captured', async () => {
        const captures = () => originNode.calls.filter((c) => c.startsWith('snapshot ')).length;
        const before = captures();
        try {
          h.limits.maxSandboxes = (await h.sandboxRepo.teamUsage(DEFAULT_TEAM_ID)).sandboxes;
          const refused = await h.snapshots.fork(origin.sandboxId, { count: 2 }).then(() => undefined, (e: SvcError) => e);
          assert.equal(refused?.status, 429);
          assert.match(refused.message, /maxSandboxes reached/);
          assert.equal(captures(), before, 'nothing captured on the node');
        } finally {
          Object.assign(h.limits, NO_LIMITS);
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

      await t.test('a snapshot keeps an environment and mounts past 64 KiB (MySQL\'s text), and a create from it gets that environment', async () => {
        // 200 KB in four values, quotes and backslashes among them (JSON escaping makes it larger still).
        const envVars = Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`BIG_${i}`, `"\\${String(i).repeat(50 * 1024 - 2)}`]));
        const s = await h.sandboxes.create(input({ envVars }));
        const snap = await h.snapshots.create(s.sandboxId, { name: 'big-env' });
        const stored = await h.repo.resolve('big-env');
        assert.deepEqual(JSON.parse(stored!.env_vars), { FROM_IMAGE: '1', ...envVars });
        const child = await h.sandboxes.create(input({ template: snap.snapshotId, memoryMB: 256 }));
        const row = await h.db.kysely.selectFrom('t_svc_sandbox').select('env_vars').where('sandbox_id', '=', child.sandboxId).executeTakeFirstOrThrow();
        assert.deepEqual(JSON.parse(row.env_vars!), { FROM_IMAGE: '1', ...envVars });
        // The most mounts a sandbox may have, with long paths, as a snapshot records them.
        const mounts = Array.from({ length: 32 }, (_, i) => ({ volumeId: `vol-${i}`, name: `v${i}`, path: `/mnt/${'p'.repeat(4000)}${i}`, readOnly: false }));
        const layerId = 'snap-bigmounts00000';
        await h.repo.insertPending({
          snapshot_id: layerId, sandbox_id: s.sandboxId, template_id: 'tpl-base', artifact_id: 'art-1', layer_id: layerId, layer_sha256: 'b'.repeat(64),
          size_bytes: 1, node_id: s.nodeId, contents: 'filesystem', cpu_count: 1, memory_mb: 256, disk_size_mb: 1024, env_vars: '{}', team_id: DEFAULT_TEAM_ID,
          created_at: Date.now(), purpose: 'snapshot', cache_key: null, build_id: null, volume_mounts: JSON.stringify(mounts),
        });
        assert.deepEqual(JSON.parse((await h.db.kysely.selectFrom('t_svc_snapshot').select('volume_mounts').where('snapshot_id', '=', layerId).executeTakeFirstOrThrow()).volume_mounts!), mounts);
        await h.repo.delete(layerId);
        await h.catalog.delete(snap.snapshotId);
      });

      await t.test('snapshot names are exact on every engine: MySnap is not found as mysnap, and both may be kept', async () => {
        const upper = await h.snapshots.create(origin.sandboxId, { name: 'MySnap' });
        assert.equal(await h.repo.resolve('mysnap'), undefined);
        assert.equal(await h.repo.resolve('MYSNAP'), undefined);
        assert.equal((await h.repo.resolve('MySnap'))?.snapshot_id, upper.snapshotId);
        assert.equal(await h.repo.resolve(upper.snapshotId.toUpperCase()), undefined, 'ids are exact too');
        assert.equal(await statusOf(h.sandboxes.create(input({ template: 'mysnap' }))), 404);
        assert.deepEqual((await h.catalog.list({ name: 'mysnap' })).snapshots, []);
        const lower = await h.snapshots.create(origin.sandboxId, { name: 'mysnap' });
        assert.equal(lower.name, 'mysnap');
        assert.equal((await h.repo.resolve('MySnap'))?.snapshot_id, upper.snapshotId, 'MySnap keeps its name: a name moves only from the same name');
        assert.equal((await h.repo.resolve('mysnap'))?.snapshot_id, lower.snapshotId);
        assert.deepEqual((await h.catalog.list({ name: 'MySnap' })).snapshots.map((x) => x.snapshotId), [upper.snapshotId]);
        await h.catalog.delete(upper.snapshotId);
        await h.catalog.delete(lower.snapshotId);
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}
