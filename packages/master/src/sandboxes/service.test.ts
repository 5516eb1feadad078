import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultConfig, ErrorCodes, MemoryCoordination, notFound, silentLogger, type SvcError } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { availableTestDatabases } from '../db/test-databases.ts';
import { migrations } from '../migrations/index.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import type { CreateSandboxInput } from '@svc/contracts/master';
import { SandboxRepo } from './repo.ts';
import { NodeEgressPolicies } from '../egress-policies.ts';
import { MasterSandboxes } from './service.ts';
import type { TemplateResolver } from './ports.ts';

const templates: TemplateResolver = {
  async resolveForCreate(ref) {
    if (ref !== 'base' && ref !== 'tpl-base') throw notFound(`template ${ref} not found`, ErrorCodes.templateNotFound);
    return {
      templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024,
      artifact: { artifactId: 'art-1', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' },
    };
  },
  async idsFor(ref) { return ref === 'base' ? ['tpl-base'] : [ref]; },
  async artifactRef(artifactId) { return { artifactId, sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' }; },
};

function input(over: Partial<CreateSandboxInput> = {}): CreateSandboxInput {
  return {
    template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
    network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], ...over,
  };
}

async function status(p: Promise<unknown>): Promise<{ status: number; code: number; message: string; headers: Record<string, string> }> {
  try {
    await p;
  } catch (e) {
    const x = e as SvcError;
    return { status: x.status, code: x.code, message: x.message, headers: x.headers };
  }
  throw new Error('expected an error');
}

async function setup(dbCfg: Parameters<typeof openDatabase>[0]) {
  const db = await openDatabase(dbCfg);
  await migrate(db.kysely, db.driver, migrations);
  const node = await new FakeNodeAgent().start();
  const nodes = new NodeRegistry(db.kysely);
  await nodes.register({
    nodeId: 'n1', address: node.url, runtime: 'gvisor', pauseKinds: ['freeze'],
    capacity: { cpuCount: 2, memoryMB: 8192 }, pausedResourceReleaseRatio: 0, version: 't',
  });
  const coordination = new MemoryCoordination();
  const events: SandboxEvent[] = [];
  coordination.subscribe(SANDBOX_EVENTS_TOPIC, (e) => events.push(e as SandboxEvent));
  const cfg = defaultConfig('/tmp/svc-test');
  cfg.master.create_timeout_insec = 1;
  const purged: string[][] = [];
  const svc = new MasterSandboxes({
    cfg, repo: new SandboxRepo(db.kysely, db.driver), nodes, templates, coordination, logger: silentLogger(),
    proxies: { purge: async (ids) => { purged.push(ids); } }, egress: new NodeEgressPolicies(nodes, '', silentLogger()), deleteTimeoutMs: 300,
  });
  return { db, node, nodes, svc, events, coordination, cfg, purged, async close() { await node.close(); await db.close(); } };
}

const flush = () => new Promise((r) => setImmediate(r));

for (const tdb of availableTestDatabases()) {
  test(`sandbox state machine on ${tdb.driver}`, { skip: tdb.skip }, async (t) => {
    const made = await tdb.create!();
    const h = await setup(made.config);
    const { svc, node } = h;
    try {
      await t.test('none → running: create with a valid template; idle clock per the timeout table', async () => {
        const before = Date.now();
        const s = await svc.create(input({ timeout: 30, metadata: { app: 'a' } }));
        assert.equal(s.state, 'running');
        assert.equal(s.timeout, 30);
        const endAt = Date.parse(s.endAt!);
        assert.ok(endAt >= before + 30_000 && endAt <= Date.now() + 30_000);
        const never = await svc.create(input());
        assert.equal(never.endAt, undefined, 'no server default: never times out, endAt omitted');
        const immediate = await svc.create(input({ timeout: 0 }));
        assert.ok((await svc.due()).some((d) => d.sandboxId === immediate.sandboxId), '0: reclaimed on the first sweep');
        await flush();
        assert.ok(h.events.some((e) => e.kind === 'sandbox.created' && e.sandboxId === s.sandboxId));
      });

      await t.test('create: a mount of a volume that does not exist fails the create', async () => {
        const e = await status(svc.create(input({ volumeMounts: [{ name: 'data', path: '/data', readOnly: false }] })));
        assert.equal(e.status, 404);
        assert.match(e.message, /volume data not found/);
      });

      await t.test('create: unknown template is 404 with the template-not-found code (130404)', async () => {
        const e = await status(svc.create(input({ template: 'nope' })));
        assert.equal(e.status, 404);
        assert.equal(e.code, ErrorCodes.templateNotFound);
      });

      await t.test('create: a node failure is a clear 500 and nothing is left on the node or in the database', async () => {
        const rowsBefore = (await svc.list({ limit: 1000 })).sandboxes.length;
        const onNodeBefore = node.sandboxes.size;
        const callsBefore = node.calls.length;
        node.behaviour.failCreate = true;
        const e = await status(svc.create(input()));
        node.behaviour.failCreate = false;
        assert.equal(e.status, 500);
        assert.match(e.message, /sandbox create failed/);
        // The node may have got further than its answer: the master removes whatever it made there.
        const attempted = node.calls.slice(callsBefore).find((c) => c.startsWith('create '))!.slice('create '.length);
        await waitUntil(() => node.calls.includes(`delete ${attempted}`));
        assert.equal(node.sandboxes.size, onNodeBefore, 'nothing left on the node');
        assert.equal((await svc.list({ limit: 1000 })).sandboxes.length, rowsBefore, 'no row for the failed create');
        assert.equal((await status(svc.get(attempted))).status, 404);
      });

      await t.test('create: past create_timeout_insec is a 504', async () => {
        node.behaviour.createDelayMs = 3500;
        const e = await status(svc.create(input()));
        node.behaviour.createDelayMs = 0;
        assert.equal(e.status, 504);
        assert.match(e.message, /create_timeout_insec/);
      });

      await t.test('running → paused by pause(); a finite deadline is unchanged; pause again is 409', async () => {
        const s = await svc.create(input({ timeout: 60 }));
        const p = await svc.pause(s.sandboxId);
        assert.equal(p.state, 'paused');
        assert.equal(p.pauseKind, 'freeze');
        assert.equal(p.endAt, s.endAt);
        const e = await status(svc.pause(s.sandboxId));
        assert.equal(e.status, 409);
        assert.ok(h.purged.some((ids) => ids.includes(s.sandboxId)), 'the pause purged the proxies\' cached route');
      });

      await t.test('paused → running by connect(): 201 semantics (resumed) and the sandbox.resumed event', async () => {
        const s = await svc.create(input({ timeout: 60 }));
        await svc.pause(s.sandboxId);
        const r = await svc.connect(s.sandboxId, undefined);
        assert.equal(r.resumed, true);
        assert.equal(r.sandbox.state, 'running');
        await flush();
        assert.ok(h.events.some((e) => e.kind === 'sandbox.resumed' && e.sandboxId === s.sandboxId));
        const again = await svc.connect(s.sandboxId, 120);
        assert.equal(again.resumed, false, 'running: 200 semantics');
        assert.ok(Date.parse(again.sandbox.endAt!) >= Date.now() + 119_000, 'N>0 ensures at least N seconds remain');
      });

      await t.test('connect/resume invalid timeouts are 400', async () => {
        const s = await svc.create(input());
        assert.equal((await status(svc.connect(s.sandboxId, 0))).status, 400);
        assert.equal((await status(svc.connect(s.sandboxId, -2))).status, 400);
        await svc.pause(s.sandboxId);
        assert.equal((await status(svc.resume(s.sandboxId, -2))).status, 400);
        const r = await svc.resume(s.sandboxId, 0);
        assert.equal(r.state, 'running');
        assert.equal((await status(svc.resume(s.sandboxId, undefined))).status, 409, 'resume of a running sandbox');
      });

      await t.test('running → terminated by kill(); then 410 on reads and 404 on a second kill', async () => {
        const s = await svc.create(input());
        await svc.kill(s.sandboxId);
        assert.ok(!node.sandboxes.has(s.sandboxId));
        assert.equal((await status(svc.get(s.sandboxId))).status, 410);
        assert.equal((await status(svc.connect(s.sandboxId, undefined))).status, 410);
        assert.equal((await status(svc.kill(s.sandboxId))).status, 404);
        assert.equal((await status(svc.kill('iunknown'))).status, 404);
        const list = await svc.list({});
        assert.ok(!list.sandboxes.some((x) => x.sandboxId === s.sandboxId), 'the sandbox leaves the list');
      });

      await t.test('paused → terminated by kill(): no resume, no sandbox.resumed, pause state removed', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        const before = node.calls.length;
        h.events.length = 0;
        await svc.kill(s.sandboxId);
        await flush();
        assert.deepEqual(node.calls.slice(before), [`delete ${s.sandboxId}`]);
        assert.ok(!h.events.some((e) => e.kind === 'sandbox.resumed'));
        assert.ok(h.events.some((e) => e.kind === 'sandbox.killed'));
      });

      await t.test('connect while a pause is under way waits for it, then resumes (the API already shows it paused)', async () => {
        const s = await svc.create(input());
        node.behaviour.pauseDelayMs = 400;
        const pausing = svc.pause(s.sandboxId);
        await new Promise((r) => setTimeout(r, 100));
        const connected = await svc.connect(s.sandboxId, undefined);
        node.behaviour.pauseDelayMs = 0;
        await pausing;
        assert.equal(connected.resumed, true);
        assert.equal(connected.sandbox.state, 'running');
        assert.deepEqual(node.calls.filter((c) => c.endsWith(s.sandboxId)).slice(-2), [`pause ${s.sandboxId}`, `resume ${s.sandboxId}`]);
        await svc.kill(s.sandboxId);
      });

      await t.test('connect that finds the sandbox paused while the pause still holds its lock waits for the lock', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'a-pause-finishing', 5_000);
        setTimeout(() => { void h.coordination.unlock(`sbx:${s.sandboxId}`, 'a-pause-finishing'); }, 300);
        const connected = await svc.connect(s.sandboxId, undefined);
        assert.equal(connected.resumed, true);
        assert.equal(connected.sandbox.state, 'running');
        await svc.kill(s.sandboxId);
      });

      await t.test('DELETE while pausing or locked: 503 with Retry-After: 2', async () => {
        const s = await svc.create(input());
        node.behaviour.pauseDelayMs = 400;
        const pausing = svc.pause(s.sandboxId);
        await new Promise((r) => setTimeout(r, 100));
        const e = await status(svc.kill(s.sandboxId));
        assert.equal(e.status, 503);
        assert.equal(e.headers['Retry-After'], '2');
        await pausing;
        node.behaviour.pauseDelayMs = 0;
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'someone-else', 5_000);
        const locked = await status(svc.kill(s.sandboxId));
        assert.equal(locked.status, 503);
        assert.equal(locked.headers['Retry-After'], '2');
        await h.coordination.unlock(`sbx:${s.sandboxId}`, 'someone-else');
        await svc.kill(s.sandboxId);
      });

      await t.test('DELETE that the node does not finish in time: 408', async () => {
        const s = await svc.create(input());
        node.behaviour.deleteDelayMs = 1000;
        const e = await status(svc.kill(s.sandboxId));
        node.behaviour.deleteDelayMs = 0;
        assert.equal(e.status, 408);
        await new Promise((r) => setTimeout(r, 800));
      });

      await t.test('resume while another operation holds the lock past the wait: 409', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        await h.coordination.tryLock(`sbx:${s.sandboxId}`, 'other', 30_000);
        assert.equal((await status(svc.connect(s.sandboxId, undefined))).status, 409);
        await h.coordination.unlock(`sbx:${s.sandboxId}`, 'other');
      });

      await t.test('resume refused by the release-ratio policy: 409 code 130409 with the node text', async () => {
        const s = await svc.create(input());
        await svc.pause(s.sandboxId);
        node.behaviour.refuseResume = 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 100MB';
        const e = await status(svc.connect(s.sandboxId, undefined));
        node.behaviour.refuseResume = undefined;
        assert.equal(e.status, 409);
        assert.equal(e.code, 130409);
        assert.equal(e.message, 'resume rejected by paused_resource_release_ratio policy: need 256MB > quota 100MB');
        assert.equal((await svc.get(s.sandboxId)).state, 'paused', 'stays paused');
      });

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
      });

      await t.test('reconcile: a sandbox the node lost is terminated; one the master never knew is removed', async () => {
        const s = await svc.create(input());
        node.sandboxes.delete(s.sandboxId);
        node.sandboxes.set('iorphan', { ...[...node.sandboxes.values()][0], sandboxId: 'iorphan' });
        await svc.reconcileNode('n1');
        assert.equal((await status(svc.get(s.sandboxId))).status, 410);
        assert.ok(!node.sandboxes.has('iorphan'));
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

async function waitUntil(cond: () => boolean, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
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
