import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MasterClient, type CreateSandboxInput, type DrainStatus } from '@svc/contracts/master';
import type { SvcError } from '@svc/common';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import { startMasterOverFakeNode } from '../testing/master-over-fake-node.ts';
import { drainCoordinationNames } from './drain.ts';

const input = (over: Partial<CreateSandboxInput> = {}): CreateSandboxInput => ({
  template: 'base', onTimeout: 'kill', autoResume: false, metadata: { app: 'm' }, envVars: { A: '1' }, secure: true,
  network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], ...over,
});

async function statusOf(p: Promise<unknown>): Promise<{ status: number; message: string }> {
  try {
    await p;
  } catch (e) {
    return { status: (e as SvcError).status, message: (e as Error).message };
  }
  throw new Error('expected an error');
}

const until = async (what: string, check: () => boolean | Promise<boolean>) => {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
};

test('pause packages, cross-node restore and drain over two fake nodes (docs/cluster.md)', async (t) => {
  const h = await startMasterOverFakeNode();
  // n2, labelled zone=b, beats only when the test says: it can be lost on purpose.
  const n2 = await new FakeNodeAgent().start();
  const register = () => h.master.nodes.register({
    nodeId: 'n2', address: n2.url, runtime: 'gvisor', pauseKinds: ['freeze', 'filesystem'], labels: { zone: 'b' },
    capacity: { cpuCount: 8, memoryMB: 16384 }, pausedResourceReleaseRatio: 0, version: 't',
  });
  await register();
  const lose = (nodeId: string) => h.master.db.kysely.updateTable('t_svc_node').set({ last_heartbeat_at: 0 }).where('node_id', '=', nodeId).execute();
  const row = (id: string) => h.master.db.kysely.selectFrom('t_svc_sandbox').selectAll().where('sandbox_id', '=', id).executeTakeFirstOrThrow();
  const packageRows = () => h.master.db.kysely.selectFrom('t_svc_snapshot').selectAll().where('purpose', '=', 'pause').execute();
  const svc = h.master.sandboxes;
  const master = new MasterClient(h.master.url);
  // Placed on n2 by its label, then recorded as a create without a selector would be: a move keeps to a selector (tested apart).
  const onN2 = async (over: Partial<CreateSandboxInput> = {}) => {
    const s = await svc.create(input({ ...over, nodeSelector: { zone: 'b' } }));
    await h.master.db.kysely.updateTable('t_svc_sandbox').set({ node_selector: null }).where('sandbox_id', '=', s.sandboxId).execute();
    return s;
  };
  try {
    await t.test('a filesystem pause stores its package (two nodes: pause_to_store auto); a frozen one cannot', async () => {
      const s = await svc.create(input({ nodeSelector: { zone: 'b' } }));
      assert.equal(s.nodeId, 'n2');
      await svc.pause(s.sandboxId, 'api', { memory: false });
      const r = await row(s.sandboxId);
      assert.match(r.pause_snapshot_id ?? '', /^pause-/);
      const [pkg] = (await packageRows()).filter((p) => p.snapshot_id === r.pause_snapshot_id);
      assert.equal(pkg.status, 'ready');
      assert.ok(h.templateCenter.layerPuts.some((p) => p.layerId === pkg.layer_id), 'the package is in the artifact store');
      assert.ok(!n2.layers.has(pkg.layer_id), 'its node keeps no copy beside the paused sandbox');
      assert.equal((await master.listSnapshots()).snapshots.length, 0, 'packages are not listed as snapshots');
      const frozen = await svc.create(input({ nodeSelector: { zone: 'b' } }));
      await svc.pause(frozen.sandboxId);
      assert.equal((await row(frozen.sandboxId)).pause_snapshot_id, null);
      await svc.kill(frozen.sandboxId);
      await svc.kill(s.sandboxId);
      await until('the killed sandbox\'s package to go', async () => (await packageRows()).length === 0);
    });

    await t.test('a paused sandbox of a lost node resumes on another from its package; the node, back, removes its copy', async () => {
      const s = await onN2();
      const token = (await row(s.sandboxId)).envd_access_token;
      await svc.pause(s.sandboxId, 'api', { memory: false });
      const pkgId = (await row(s.sandboxId)).pause_snapshot_id!;
      await lose('n2');
      const connected = await svc.connect(s.sandboxId, 60);
      assert.equal(connected.resumed, true);
      assert.equal(connected.sandbox.nodeId, 'n1');
      assert.equal(connected.sandbox.state, 'running');
      const body = h.node.createBodies.get(s.sandboxId)!;
      assert.equal(body.layer?.layerId, pkgId, 'created from the package');
      assert.match(body.layer?.downloadUrl ?? '', /\/internal\/v1\/layers\//);
      assert.equal(body.envdAccessToken, token, 'the same envd token: the SDK that holds it goes on');
      assert.deepEqual(body.envVars, { A: '1' });
      assert.deepEqual(body.metadata, { app: 'm' });
      const after = await row(s.sandboxId);
      assert.equal(after.node_id, 'n1');
      assert.equal(after.pause_snapshot_id, null);
      await until('the used package to go', async () => (await packageRows()).length === 0);
      assert.ok(h.node.calls.includes(`download layer ${pkgId}`));
      // n2 comes back still holding its paused copy: the master has it removed, not resumed.
      assert.equal(n2.sandboxes.get(s.sandboxId)?.state, 'paused');
      await register();
      await h.master.sandboxes.reconcileNode('n2');
      assert.ok(!n2.sandboxes.has(s.sandboxId), 'the copy left behind is removed');
      assert.equal((await svc.get(s.sandboxId)).nodeId, 'n1', 'one sandbox, on n1');
      await svc.kill(s.sandboxId);
    });

    await t.test('the lost node sweep leaves a sandbox moving off the node alone, and settles a move a stopped master left', async () => {
      await register();
      const s = await onN2();
      await svc.pause(s.sandboxId, 'api', { memory: false });
      await lose('n2');
      // As a master that stopped in the middle of moveAndResume leaves it: resuming, its lock free.
      await h.master.db.kysely.updateTable('t_svc_sandbox').set({ state: 'resuming' }).where('sandbox_id', '=', s.sandboxId).execute();
      await svc.sweepLostNodes();
      const r = await row(s.sandboxId);
      assert.equal(r.state, 'paused', 'not reported lost: its state is in the store');
      assert.ok(r.pause_snapshot_id);
      assert.equal((await svc.connect(s.sandboxId, 60)).sandbox.nodeId, 'n1', 'the next resume moves it');
      await svc.kill(s.sandboxId);
    });

    await t.test('a lost node\'s sandbox without a package: 503 naming the node, and it stays paused', async () => {
      await register();
      const s = await onN2();
      await svc.pause(s.sandboxId);
      await lose('n2');
      const e = await statusOf(svc.connect(s.sandboxId, 60));
      assert.equal(e.status, 503);
      assert.match(e.message, /node n2, which is not answering/);
      assert.equal((await row(s.sandboxId)).state, 'paused');
      await register();
      await svc.kill(s.sandboxId);
    });

    await t.test('a move keeps to the create\'s nodeSelector: with no other node holding its labels, 503 and it stays paused', async () => {
      await register();
      const s = await svc.create(input({ nodeSelector: { zone: 'b' } }));
      await svc.pause(s.sandboxId, 'api', { memory: false });
      assert.ok((await row(s.sandboxId)).pause_snapshot_id);
      await lose('n2');
      const e = await statusOf(svc.connect(s.sandboxId, 60));
      assert.equal(e.status, 503);
      assert.match(e.message, /no node with the gvisor runtime and labels zone=b is available now/);
      assert.equal((await row(s.sandboxId)).state, 'paused');
      await register();
      await svc.kill(s.sandboxId);
    });

    // A drain answers at once and goes on in the background; this follows it to its end.
    const drained = async (nodeId: string) => follow(await master.drainNode(nodeId));
    const follow = async (from: DrainStatus) => {
      let status = from;
      const nodeId = from.node.nodeId;
      while (status.state === 'running') {
        await new Promise((r) => setTimeout(r, 20));
        status = await master.drainStatus(nodeId);
      }
      return status;
    };

    await t.test('drain: new creates avoid the node; running sandboxes move, paused ones are stored; undrain', async () => {
      await register();
      const running = await onN2();
      const frozen = await onN2();
      await svc.pause(frozen.sandboxId);
      n2.behaviour.pauseDelayMs = 300;
      // Asked twice at once of one master: one drain (both took the lease, renewable by that master, before).
      const [started, twin] = await Promise.all([master.drainNode('n2'), master.drainNode('n2')]);
      assert.equal(twin.startedAt, started.startedAt, 'two drains asked at once are one drain');
      assert.equal(started.state, 'running', 'the drain answers before its first move is done');
      assert.equal(started.total, 2);
      assert.equal(started.remaining, 2);
      assert.equal(started.node.status, 'draining');
      const again = await master.drainNode('n2');
      assert.equal(again.startedAt, started.startedAt, 'a drain asked for again while under way is the same drain');
      const report = await drained('n2');
      n2.behaviour.pauseDelayMs = 0;
      assert.equal(report.state, 'done');
      assert.equal(report.remaining, 0);
      assert.ok(report.finishedAt);
      assert.equal(report.node.status, 'draining');
      assert.deepEqual(report.moved, [running.sandboxId]);
      assert.deepEqual(report.stored, [frozen.sandboxId]);
      assert.deepEqual(report.failed, []);
      assert.equal(n2.calls.filter((c) => c === `pause ${running.sandboxId}`).length, 1, 'one drain ran, not two');
      const at = (call: string) => n2.calls.indexOf(call);
      assert.ok(at(`resume ${frozen.sandboxId}`) >= 0 && at(`resume ${frozen.sandboxId}`) < at(`delete ${running.sandboxId}`),
        `two moves at once (master.drain_concurrency 2): the frozen one was woken while the running one was still moving; calls ${JSON.stringify(n2.calls)}`);
      assert.deepEqual(await master.drainStatus('n2'), report, 'its end stays readable');
      assert.equal((await svc.get(running.sandboxId)).nodeId, 'n1');
      assert.equal((await svc.get(running.sandboxId)).state, 'running');
      assert.ok(!n2.sandboxes.has(running.sandboxId), 'the drained node\'s copy is removed at once');
      assert.equal((await svc.get(frozen.sandboxId)).state, 'paused');
      assert.ok((await row(frozen.sandboxId)).pause_snapshot_id, 'the frozen one was paused again without memory and stored');
      // Heartbeats and a restart keep it drained.
      await h.master.nodes.heartbeat('n2', { sandboxes: { running: 0, paused: 1 }, usedMemoryMB: 0 });
      await register();
      assert.equal((await master.getNode('n2')).status, 'draining');
      const e = await statusOf(svc.create(input({ nodeSelector: { zone: 'b' } })));
      assert.equal(e.status, 503, 'the only zone=b node is draining');
      assert.equal((await svc.connect(frozen.sandboxId, 60)).sandbox.nodeId, 'n1', 'the stored one resumes elsewhere');
      assert.equal((await master.undrainNode('n2')).status, 'ready');
      assert.equal((await svc.create(input({ nodeSelector: { zone: 'b' } }))).nodeId, 'n2');
      assert.equal((await statusOf(master.drainNode('no-such-node'))).status, 404);
      assert.equal((await statusOf(master.drainStatus('no-such-node'))).status, 404);
      assert.match((await statusOf(master.drainStatus('n1'))).message, /node n1 has no drain on record/);
    });

    await t.test('an undrain stops a drain under way before its next sandbox', async () => {
      const ids = [(await onN2()).sandboxId, (await onN2()).sandboxId, (await onN2()).sandboxId];
      n2.behaviour.pauseDelayMs = 300;
      const started = await master.drainNode('n2');
      await master.undrainNode('n2');
      const status = await follow(started);
      n2.behaviour.pauseDelayMs = 0;
      assert.equal(status.state, 'stopped');
      // Two moves at once by default (master.drain_concurrency): those in hand finish, no more start.
      assert.ok(status.remaining >= 1, `it went over ${status.total - status.remaining} of 3`);
      assert.equal(status.node.status, 'ready');
      for (const id of ids.filter((i) => !status.moved.includes(i))) assert.equal((await svc.get(id)).nodeId, 'n2');
      for (const id of ids) await svc.kill(id);
    });

    await t.test('a drain another master runs is answered, not run twice; once its lease lapses it reads interrupted', async () => {
      const other = await onN2();
      const { lease, record } = drainCoordinationNames('n2');
      await h.coordination.acquireLease(lease, 'another-master', 60_000);
      const theirs = { state: 'running', total: 5, remaining: 4, moved: ['x'], stored: [], failed: [], startedAt: new Date(0).toISOString() };
      await h.coordination.kvSet(record, JSON.stringify(theirs));
      const answered = await master.drainNode('n2');
      assert.equal(answered.state, 'running');
      assert.deepEqual(answered.moved, ['x']);
      assert.equal(answered.startedAt, theirs.startedAt);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(!n2.calls.includes(`pause ${other.sandboxId}`), 'this master did not drain the node too');
      await h.coordination.releaseLease(lease, 'another-master');
      assert.equal((await master.drainStatus('n2')).state, 'interrupted');
      assert.equal((await drained('n2')).state, 'done', 'a drain asked for again then runs here');
      assert.equal((await svc.get(other.sandboxId)).nodeId, 'n1');
      await master.undrainNode('n2');
      await svc.kill(other.sandboxId);
    });

    await t.test('a drain with nowhere to go reports what stayed; the sandbox is kept paused with its package', async () => {
      const alone = await onN2();
      await lose('n1');
      const report = await drained('n2');
      assert.equal(report.moved.length, 0);
      assert.ok(report.failed.some((f) => f.sandboxId === alone.sandboxId && /no node/.test(f.message)), JSON.stringify(report.failed));
      const r = await row(alone.sandboxId);
      assert.equal(r.state, 'paused');
      assert.ok(r.pause_snapshot_id);
      await master.undrainNode('n2');
    });

    await t.test('the orphan sweep removes what no record puts on the node once seen so past its grace, and leaves the rest', async () => {
      await register();
      const put = (id: string) => n2.sandboxes.set(id, {
        sandboxId: id, templateId: 'tpl-base', state: 'running', address: '10.99.9.9', envdPort: 49983, envdVersion: '0', runtime: 'gvisor', cpuCount: 1, memoryMB: 256,
        startedAt: new Date().toISOString(),
      });
      // The earlier move off a lost n2 that came back without registering left its copy there: an orphan too.
      const leftBehind: string[] = [];
      for (const id of n2.sandboxes.keys()) {
        const r = await h.master.db.kysely.selectFrom('t_svc_sandbox').selectAll().where('sandbox_id', '=', id).executeTakeFirst();
        if (!r || r.node_id !== 'n2' || r.state === 'terminated') leftBehind.push(id);
      }
      assert.equal(leftBehind.length, 1);
      put('orphan-unrecorded');
      put('orphan-locked');
      const known = (await onN2()).sandboxId;
      // Reported lost while the node was cut off, then the node came back without registering again.
      const reportedLost = (await onN2()).sandboxId;
      await h.master.db.kysely.updateTable('t_svc_sandbox').set({ state: 'terminated', terminate_reason: 'node_lost' }).where('sandbox_id', '=', reportedLost).execute();
      // An abandoned move's copy: the record puts the sandbox on n1.
      const movedAway = (await onN2()).sandboxId;
      await h.master.db.kysely.updateTable('t_svc_sandbox').set({ node_id: 'n1', state: 'paused' }).where('sandbox_id', '=', movedAway).execute();

      assert.deepEqual(await svc.removeOrphans('n2', 100), [], 'the first sight starts the grace: a create under way is recorded within it');
      await new Promise((r) => setTimeout(r, 150));
      put('orphan-fresh');
      assert.equal(await h.coordination.tryLock('sbx:orphan-locked', 'another master', 60_000), true);
      const removed = await svc.removeOrphans('n2', 100);
      assert.deepEqual(removed.sort(), ['orphan-unrecorded', reportedLost, movedAway, ...leftBehind].sort());
      assert.deepEqual([...n2.sandboxes.keys()].filter((id) => id.startsWith('orphan-') || id === known).sort(), [known, 'orphan-fresh', 'orphan-locked'].sort(),
        'a recorded sandbox, one first seen within the grace and one under another master\'s lock stay');
      assert.equal((await row(movedAway)).node_id, 'n1', 'the record is left as it was');
      await h.coordination.unlock('sbx:orphan-locked', 'another master');
      await new Promise((r) => setTimeout(r, 150));
      assert.deepEqual((await svc.removeOrphans('n2', 100)).sort(), ['orphan-fresh', 'orphan-locked'], 'their turn comes at a later sweep');
      await svc.kill(known);
    });
  } finally {
    await h.close();
    await n2.close();
  }
});
