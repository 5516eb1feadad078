/** Idle deadlines, listing, reconcile and node loss, and where a sandbox is placed (runtime, node labels). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableTestDatabases } from '../db/test-databases.ts';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import { flush, input, setup, status, templates } from './service-test-support.ts';

for (const tdb of availableTestDatabases()) {
  test(`sandbox deadlines, listing and placement on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    const { svc, node } = h;
    try {
      await t.test('idle timeout: due list per on_timeout (running kill/pause, paused kill)', async () => {
        const k = await svc.create(input({ timeout: 0, onTimeout: 'kill' }));
        const p = await svc.create(input({ timeout: 0, onTimeout: 'pause' }));
        const pk = await svc.create(input({ timeout: 0, onTimeout: 'kill' }));
        await svc.pause(pk.sandboxId);
        const pp = await svc.create(input({ timeout: 0, onTimeout: 'pause' }));
        await svc.pause(pp.sandboxId);
        const due = new Map((await svc.due()).map((d) => [d.sandboxId, d]));
        assert.equal(due.get(k.sandboxId)?.onTimeout, 'kill');
        assert.equal(due.get(p.sandboxId)?.onTimeout, 'pause');
        assert.equal(due.get(pk.sandboxId)?.state, 'paused', 'a paused on_timeout=kill sandbox is still destroyed');
        assert.ok(!due.has(pp.sandboxId), 'a paused on_timeout=pause sandbox stays paused');
        await svc.kill(k.sandboxId, 'timeout');
        assert.match((await status(svc.get(k.sandboxId))).message, /timed out/);
      });

      await t.test('activity resets the idle clock of running sandboxes only', async () => {
        const s = await svc.create(input({ timeout: 2 }));
        const first = Date.parse(s.endAt!);
        await new Promise((r) => setTimeout(r, 50));
        await svc.activity([s.sandboxId]);
        assert.ok(Date.parse((await svc.get(s.sandboxId)).endAt!) > first);
        await svc.pause(s.sandboxId);
        const paused = (await svc.get(s.sandboxId)).endAt;
        await svc.activity([s.sandboxId]);
        assert.equal((await svc.get(s.sandboxId)).endAt, paused);
      });

      await t.test('a timeout of 2^31-1 s in a batch of activity: the batch still moves every clock', async () => {
        // PostgreSQL computed timeout_sec * 1000 in 32 bits: one such sandbox failed every batch it was in.
        const long = await svc.create(input({ timeout: 2_147_483_647 }));
        const short = await svc.create(input({ timeout: 2 }));
        const first = Date.parse(short.endAt!);
        await new Promise((r) => setTimeout(r, 50));
        await svc.activity([long.sandboxId, short.sandboxId]);
        assert.ok(Date.parse((await svc.get(short.sandboxId)).endAt!) > first);
        await svc.kill(long.sandboxId);
        await svc.kill(short.sandboxId);
      });

      await t.test('set_timeout shortens; refresh extends; -1 never', async () => {
        const s = await svc.create(input({ timeout: 600 }));
        const short = await svc.setTimeout(s.sandboxId, 5);
        assert.ok(Date.parse(short.endAt!) <= Date.now() + 5_000);
        const refreshed = await svc.refresh(s.sandboxId, 100);
        assert.ok(Date.parse(refreshed.endAt!) >= Date.now() + 99_000);
        const never = await svc.setTimeout(s.sandboxId, -1);
        assert.equal(never.endAt, undefined);
        assert.equal((await status(svc.setTimeout(s.sandboxId, 1.5))).status, 400);
      });

      await t.test('list: state and metadata filters, limit and nextToken pagination', async () => {
        const tag = `m${Date.now()}`;
        const made: string[] = [];
        for (let i = 0; i < 5; i++) made.push((await svc.create(input({ metadata: { tag, i: String(i) } }))).sandboxId);
        await svc.pause(made[0]);
        const filter = new URLSearchParams({ tag }).toString();
        const page1 = await svc.list({ metadata: filter, limit: 2 });
        assert.equal(page1.sandboxes.length, 2);
        assert.ok(page1.nextToken);
        const page2 = await svc.list({ metadata: filter, limit: 2, nextToken: page1.nextToken });
        const page3 = await svc.list({ metadata: filter, limit: 2, nextToken: page2.nextToken });
        const all = [...page1.sandboxes, ...page2.sandboxes, ...page3.sandboxes].map((s) => s.sandboxId);
        assert.deepEqual(new Set(all), new Set(made));
        assert.equal(page3.nextToken, undefined);
        const paused = await svc.list({ metadata: filter, state: 'paused' });
        assert.deepEqual(paused.sandboxes.map((s) => s.sandboxId), [made[0]]);
        assert.equal((await status(svc.list({ state: 'bogus' }))).status, 400);
        assert.equal((await status(svc.list({ limit: 0 }))).status, 400);
        assert.equal((await status(svc.list({ nextToken: '!!' }))).status, 400);
        // Past a safe integer: PostgreSQL's bigint refused it with a 500.
        assert.equal((await status(svc.list({ nextToken: Buffer.from(`1${'0'.repeat(20)}:abc`).toString('base64url') }))).status, 400);
      });

      await t.test('reconcile: a sandbox the node lost is terminated; one terminated here is removed; one never recorded is left to the orphan sweep', async () => {
        const s = await svc.create(input());
        const gone = await svc.create(input());
        const kept = node.sandboxes.get(gone.sandboxId)!;
        await svc.kill(gone.sandboxId);
        node.sandboxes.delete(s.sandboxId);
        // Back on the node after its record ended (a node that returns after a partition).
        node.sandboxes.set(gone.sandboxId, kept);
        // As a create under way looks: its node has it, its record comes once it is ready.
        node.sandboxes.set('iorphan', { ...kept, sandboxId: 'iorphan' });
        await svc.reconcileNode('n1');
        assert.equal((await status(svc.get(s.sandboxId))).status, 410);
        assert.ok(!node.sandboxes.has(gone.sandboxId), 'terminated here: removed at once');
        assert.ok(node.sandboxes.has('iorphan'), 'no record at all: a create may be under way, so it waits for the orphan sweep');
        assert.deepEqual(await svc.removeOrphans('n1', 0), ['iorphan']);
        assert.ok(h.purged.some((ids) => ids.includes(s.sandboxId)), 'a sandbox that ended on its node is purged from the proxies like a killed one');
      });

      await t.test('runtime: placed on a node that offers it; none offers it is 400, a saved machine needs microvm', async () => {
        const asked = await status(svc.create(input({ runtime: 'microvm' })));
        assert.equal(asked.status, 400);
        assert.match(asked.message, /no node offers the microvm runtime \(nodes offer gvisor\)/);
        const tpl = await templates.resolveForCreate('base');
        const fromTemplate = await status(svc.create(input(), { ...tpl, runtime: 'microvm' }));
        assert.equal(fromTemplate.status, 400, "the template's runtime counts like the request's");
        const machine = { ...tpl, layer: { snapshotId: 'snap-1', ref: { layerId: 'snap-1', sha256: 'x', sizeBytes: 1, contents: 'memory' as const } } };
        const gvisorMachine = await status(svc.create(input({ runtime: 'gvisor' }), machine));
        assert.equal(gvisorMachine.status, 400);
        assert.match(gvisorMachine.message, /only the microvm runtime restores/);

        const both = await new FakeNodeAgent().start();
        try {
          await h.nodes.register({
            nodeId: 'n2', address: both.url, runtime: 'gvisor', runtimes: ['gvisor', 'microvm'], pauseKinds: ['freeze'],
            capacity: { cpuCount: 2, memoryMB: 1024 }, pausedResourceReleaseRatio: 0, version: 't',
          });
          const s = await svc.create(input({ runtime: 'microvm' }));
          assert.equal(s.nodeId, 'n2', 'n1 has more memory free but offers gvisor only');
          assert.equal(s.runtime, 'microvm');
          assert.ok(both.calls.includes(`create ${s.sandboxId}`));
          assert.equal(both.createBodies.get(s.sandboxId)?.runtime, 'microvm', 'the node is told which of its runtimes runs it');
          const viaTemplate = await svc.create(input(), { ...tpl, runtime: 'microvm' });
          assert.equal(viaTemplate.nodeId, 'n2');
          const plain = await svc.create(input());
          assert.equal(plain.nodeId, 'n1', 'no runtime asked: the node with the most memory free');
          assert.equal(node.createBodies.get(plain.sandboxId)?.runtime, undefined, "and it runs on that node's default");
          assert.deepEqual((await h.nodes.get('n2')).runtimes, ['gvisor', 'microvm']);
          assert.deepEqual((await h.nodes.get('n1')).runtimes, ['gvisor'], 'an agent that sends no runtimes offers its runtime');
          await h.db.kysely.updateTable('t_svc_node').set({ last_heartbeat_at: 0 }).where('node_id', '=', 'n2').execute();
          const down = await status(svc.create(input({ runtime: 'microvm' })));
          assert.equal(down.status, 503, 'the node that offers it is down: retry later');
        } finally {
          await both.close();
        }
      });

      await t.test('node loss: a node silent past node_lost_after_sec has its running sandboxes ended as node_lost; paused ones wait for it', async () => {
        const far = await new FakeNodeAgent().start();
        try {
          await h.nodes.register({
            nodeId: 'n5', address: far.url, runtime: 'gvisor', pauseKinds: ['freeze'], labels: { site: 'far' },
            capacity: { cpuCount: 2, memoryMB: 1024 }, pausedResourceReleaseRatio: 0, version: 't',
          });
          const running = await svc.create(input({ nodeSelector: { site: 'far' } }));
          const paused = await svc.create(input({ nodeSelector: { site: 'far' } }));
          await svc.pause(paused.sandboxId);
          await svc.sweepLostNodes();
          assert.equal((await svc.get(running.sandboxId)).state, 'running', 'a node that beats is not lost');
          await h.db.kysely.updateTable('t_svc_node').set({ last_heartbeat_at: Date.now() - (h.cfg.master.node_lost_after_sec + 1) * 1000 }).where('node_id', '=', 'n5').execute();
          await svc.sweepLostNodes();
          const lost = await status(svc.get(running.sandboxId));
          assert.equal(lost.status, 410);
          assert.match(lost.message, /lost with its node n5/);
          assert.equal((await svc.get(paused.sandboxId)).state, 'paused', 'its state is on the node: it waits for it');
          await flush();
          assert.ok(h.events.some((e) => e.kind === 'sandbox.killed' && e.sandboxId === running.sandboxId));
        } finally {
          await far.close();
        }
      });

      await t.test('nodeSelector: placed on a node whose labels hold it; labels a node registers with; none has them is 400', async () => {
        const other = await new FakeNodeAgent().start();
        try {
          await h.nodes.addLabels('n1', { tier: 'api-set' });
          await h.nodes.register({
            nodeId: 'n3', address: other.url, runtime: 'gvisor', pauseKinds: ['freeze'], labels: { zone: 'b', tier: 'gold' },
            capacity: { cpuCount: 2, memoryMB: 1024 }, pausedResourceReleaseRatio: 0, version: 't',
          });
          assert.deepEqual((await h.nodes.get('n3')).labels, { zone: 'b', tier: 'gold' });
          const s = await svc.create(input({ nodeSelector: { zone: 'b' } }));
          assert.equal(s.nodeId, 'n3', 'n1 has more memory free, but not the label');
          assert.equal((await svc.create(input({ nodeSelector: { tier: 'api-set' } }))).nodeId, 'n1', 'labels from the label routes count too');
          const none = await status(svc.create(input({ nodeSelector: { zone: 'c' } })));
          assert.equal(none.status, 400);
          assert.match(none.message, /no node has labels zone=c/);
          // A registration again puts its configured labels over the same names, and keeps the others.
          await h.nodes.addLabels('n3', { tier: 'silver', extra: 'x' });
          await h.nodes.register({
            nodeId: 'n3', address: other.url, runtime: 'gvisor', pauseKinds: ['freeze'], labels: { zone: 'b', tier: 'gold' },
            capacity: { cpuCount: 2, memoryMB: 1024 }, pausedResourceReleaseRatio: 0, version: 't',
          });
          assert.deepEqual((await h.nodes.get('n3')).labels, { zone: 'b', tier: 'gold', extra: 'x' });
          // A node that refuses (its own admission: another master filled it) is left out, and the next one asked.
          node.behaviour.refuseCreate = 'this node cannot take another sandbox now: nominal memory quota';
          try {
            const moved = await svc.create(input());
            assert.equal(moved.nodeId, 'n3', 'n1 refused: the next node took it');
            other.behaviour.refuseCreate = 'this node cannot take another sandbox now: reserve';
            const full = await status(svc.create(input()));
            assert.equal(full.status, 503);
            assert.match(full.message, /no node can take the sandbox now: node n1: .*nominal memory quota; node n3: .*reserve/);
          } finally {
            node.behaviour.refuseCreate = undefined;
            other.behaviour.refuseCreate = undefined;
          }
          await h.db.kysely.updateTable('t_svc_node').set({ last_heartbeat_at: 0 }).where('node_id', '=', 'n3').execute();
          assert.equal((await status(svc.create(input({ nodeSelector: { zone: 'b' } })))).status, 503, 'the node with the label is down');
        } finally {
          await other.close();
        }
      });
    } finally {
      await h.close();
      await made.drop();
    }
  });
}

test('timeout actions re-check the deadline: traffic since the due list wins', async () => {
  const tdb = availableTestDatabases()[0];
  const made = await tdb.create!();
  const h = await setup(made.config);
  try {
    const s = await h.svc.create(input({ timeout: 1, onTimeout: 'pause' }));
    await new Promise((r) => setTimeout(r, 1100));
    assert.ok((await h.svc.due()).some((d) => d.sandboxId === s.sandboxId));
    await h.svc.activity([s.sandboxId]);
    assert.equal((await status(h.svc.pause(s.sandboxId, 'timeout'))).status, 409);
    assert.equal((await status(h.svc.kill(s.sandboxId, 'timeout'))).status, 409);
    assert.equal((await h.svc.get(s.sandboxId)).state, 'running');
  } finally {
    await h.close();
    await made.drop();
  }
});
