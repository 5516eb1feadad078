/**
 * A cluster on one machine (docs/cluster.md), every component a process of its own started as an
 * operator starts it (`svc <component> --config FILE`): two masters on one PostgreSQL and one
 * Redis, an API gateway, a template center, a data-plane proxy, and two node agents with their
 * own state, address pools, ports and labels, each registered with a different master.
 *
 * What it shows: both nodes register with their runtimes and labels (`svc node list`); a
 * create's nodeSelector picks the node, and the proxy reaches a sandbox on either; creates
 * hammered at both masters at once never put a node past its quota; the lifecycle replicas pause
 * at the idle timeout and a second proxy resumes; a node killed with SIGKILL
 * has its running sandboxes reported lost, and removes them when it returns; a paused sandbox of
 * a killed node resumes on the other node (cross-node restore); `svc node drain` moves a running
 * sandbox; a lifecycle leader or a proxy killed mid-work leaves nothing stuck.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Sandbox } from '@svc/sdk';
import { availableTestDatabases } from '@svc/master/testing/test-databases';
import { CLUSTER_TOKEN_HEADER } from '@svc/contracts/cluster-token';
import { API_KEY, Cluster, deleteSandbox, json, NODE_HEADERS, REDIS_HOST } from './cluster-harness.ts';
import { REPO, sandboxProcessesAll, waitFor } from './harness.ts';

const SVC = join(REPO, 'dist/svc.mjs');
const skipAll = !REDIS_HOST ? 'Redis is not running (scripts/test-services.sh start)' : process.getuid?.() !== 0 ? 'node agents run as root' : false;

// The cluster on each external database engine of docs/configuration.md "Database", always with Redis.
for (const engine of availableTestDatabases().filter((e) => e.driver !== 'sqlite')) {
  const skip = skipAll || engine.skip || false;
  describe(`a cluster on ${engine.driver} and Redis${engine.driver === 'mysql' ? ', TLS everywhere' : ''}`, { skip }, () => {
    let c: Cluster;
    // Room for four sandboxes of 256 MB on each node: what the hammer below fills. Node loss told after 6 s, not 30.
    // The MariaDB run speaks TLS between components (cluster_tls) and to MariaDB and Redis; the PostgreSQL run plain.
    before(async () => { c = await Cluster.start({ dir: '/tmp/svc-e2e-cluster', db: await engine.create!(), nodeMemoryMB: 1024, nodeLostAfterSec: 6, tls: engine.driver === 'mysql' }); });
    after(() => c?.stop());
    /**
     * A kill once the sandbox is out of a pause or resume under way (the API already shows a
     * pausing sandbox as paused, and a DELETE then answers 503 with Retry-After).
     */
    const killSettled = (id: string) => waitFor(`sandbox ${id} killed`, () => Sandbox.kill(id, c.conn).then(() => true), 60_000);
    /** The node a sandbox runs on, and the other one. */
    const nodesOf = async (id: string): Promise<['a' | 'b', 'a' | 'b']> => {
      const on = (await json<{ nodeId: string }>(`${c.master('A')}/v1/sandboxes/${id}`)).body.nodeId;
      return on === 'node-a' ? ['a', 'b'] : ['b', 'a'];
    };

    it('two nodes, two masters: registration, labels and runtimes, placement by selector, the proxy reaches either node', async () => {
      const cli = (args: string[]) => execFileSync(process.execPath, [SVC, ...args, '--api-url', c.apiUrl, '--api-key', API_KEY, '--json'], { encoding: 'utf8' });
      const nodes = JSON.parse(cli(['node', 'list'])) as Array<{ id: string; labels: Record<string, string>; runtimes?: string[] }>;
      assert.deepEqual(nodes.map((n) => [n.id, n.labels.zone, n.runtimes]).sort(), [['node-a', 'a', ['gvisor']], ['node-b', 'b', ['gvisor']]]);
      // With cluster_tls the nodes registered HTTPS addresses, and the masters answer HTTPS alone.
      for (const n of nodes as Array<{ address?: string }>) assert.ok(n.address?.startsWith(`${c.scheme}://`), `node address ${n.address}`);
      if (c.scheme === 'https') await assert.rejects(fetch(`${c.master('A').replace('https:', 'http:')}/v1/nodes`).then((r) => r.text()));
      // cluster_token: without it a master is nobody's and a lifecycle replica resumes nothing; their probes answer.
      const without = { [CLUSTER_TOKEN_HEADER]: 'not-the-token' };
      for (const url of [`${c.master('A')}/v1/teams`, `${c.master('B')}/internal/v1/platform-addresses`]) assert.equal((await json(url, { headers: without })).status, 401, url);
      assert.equal((await json(`${c.master('A')}/internal/v1/nodes/register`, { method: 'POST', body: '{}', headers: without })).status, 401);
      assert.equal((await json(`${c.lifecycleUrl(0)}/internal/resume`, { method: 'POST', body: '{"sandboxId":"x"}', headers: without })).status, 401);
      assert.equal((await json(`${c.master('A')}/notify/health`, { headers: without })).status, 200);
      assert.equal((await json(`${c.lifecycleUrl(1)}/health`, { headers: without })).status, 200);

      const conn = c.conn;
      for (const zone of ['a', 'b'] as const) {
        const sbx = await Sandbox.create('base', { ...conn, nodeSelector: { zone } });
        try {
          const { body } = await json<{ nodeId: string }>(`${c.master('B')}/v1/sandboxes/${sbx.sandboxId}`);
          assert.equal(body.nodeId, `node-${zone}`, 'placed on the node with the label; the other master sees it too');
          assert.equal((await sbx.commands.run('echo hello from $ZONE', { envs: { ZONE: zone } })).stdout, `hello from ${zone}\n`);
          // Any proxy reaches any node.
          const viaSecond = await Sandbox.connect(sbx.sandboxId, { ...conn, sandboxUrl: c.proxy2Url });
          assert.equal((await viaSecond.commands.run('echo second proxy')).stdout, 'second proxy\n');
        } finally {
          await sbx.kill();
        }
      }
      await assert.rejects(Sandbox.create('base', { ...conn, nodeSelector: { zone: 'c' } }), (e: Error) => /no node has labels zone=c/.test(e.message));
    });

    it('a node killed with SIGKILL: its running sandbox is reported lost, creates go to the other node, and the node removes it when it returns', async (t) => {
      const conn = c.conn;
      const sbx = await Sandbox.create('base', { ...conn, nodeSelector: { zone: 'b' } });
      const killedAt = Date.now();
      c.killNode('b');
      const lost = await waitFor('the sandbox reported lost', async () => {
        const r = await json<{ message: string }>(`${c.master('A')}/v1/sandboxes/${sbx.sandboxId}`);
        return r.status === 410 ? r.body.message : undefined;
      }, 60_000);
      t.diagnostic(`reported lost ${Date.now() - killedAt} ms after the kill (node_lost_after_sec 6, swept every 5 s)`);
      assert.match(lost, /lost with its node node-b/);
      const elsewhere = await Sandbox.create('base', conn);
      assert.equal((await json<{ nodeId: string }>(`${c.master('A')}/v1/sandboxes/${elsewhere.sandboxId}`)).body.nodeId, 'node-a');
      await elsewhere.kill();

      // It comes back: it adopts what still runs there, and the master has it remove the sandbox it reported lost.
      c.restartNode('b');
      await waitFor('node b back, with nothing of the lost sandbox left', async () => {
        const onNode = await json<Array<{ sandboxId: string }>>(`${c.nodeUrl('b')}/v1/sandboxes`, { headers: NODE_HEADERS });
        return onNode.status === 200 && onNode.body.length === 0 ? true : undefined;
      }, 60_000);
      assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(c.nodeStateDir('b'))), []);
    });

    it('cross-node restore: a paused sandbox of a node killed with SIGKILL resumes on the other node with its files; the node, back, keeps no copy', async (t) => {
      // No selector: a move keeps to one, and each label here is one node's.
      const sbx = await Sandbox.create('base', c.conn);
      const [from, to] = await nodesOf(sbx.sandboxId);
      await sbx.files.write('/home/user/moved.txt', `made on node ${from}`);
      // Without memory: gVisor here can store a paused sandbox's files, not its frozen processes.
      await sbx.pause({ keepMemory: false });
      c.killNode(from);
      await waitFor(`node ${from} seen down`, async () => ((await json<{ status: string }>(`${c.master('A')}/v1/nodes/node-${from}`)).body.status === 'unreachable' ? true : undefined), 60_000);
      const started = Date.now();
      const back = await Sandbox.connect(sbx.sandboxId, { ...c.conn, sandboxUrl: c.proxy2Url });
      t.diagnostic(`resumed on the other node in ${Date.now() - started} ms`);
      assert.equal((await json<{ nodeId: string }>(`${c.master('B')}/v1/sandboxes/${sbx.sandboxId}`)).body.nodeId, `node-${to}`);
      assert.equal(await back.files.read('/home/user/moved.txt'), `made on node ${from}`);
      assert.equal((await back.commands.run('echo running')).stdout, 'running\n');
      c.restartNode(from);
      await waitFor(`node ${from} back, its paused copy removed`, async () => {
        const onNode = await json<Array<{ sandboxId: string }>>(`${c.nodeUrl(from)}/v1/sandboxes`, { headers: NODE_HEADERS });
        return onNode.status === 200 && !onNode.body.some((x) => x.sandboxId === sbx.sandboxId) ? true : undefined;
      }, 60_000);
      await waitFor(`node ${from} ready`, async () => ((await json<{ status: string }>(`${c.master('A')}/v1/nodes/node-${from}`)).body.status === 'ready' ? true : undefined), 60_000);
      assert.equal((await back.commands.run('cat /home/user/moved.txt')).stdout, `made on node ${from}`, 'still one sandbox, on the other node');
      await back.kill();
    });

    it('a move keeps to the create\'s nodeSelector: svc node drain reports the sandbox no other node may take, and leaves it paused with its state stored', async () => {
      const cli = (args: string[]) => execFileSync(process.execPath, [SVC, ...args, '--api-url', c.apiUrl, '--api-key', API_KEY, '--json'], { encoding: 'utf8' });
      const sbx = await Sandbox.create('base', { ...c.conn, nodeSelector: { zone: 'a' } });
      try {
        let out = '';
        try {
          cli(['node', 'drain', 'node-a']);
        } catch (e) {
          out = String((e as { stdout?: string }).stdout);
        }
        const report = JSON.parse(out) as { moved: string[]; failed: Array<{ sandboxId: string; message: string }> };
        assert.deepEqual(report.moved, []);
        assert.equal(report.failed[0]?.sandboxId, sbx.sandboxId);
        assert.match(report.failed[0].message, /labels zone=a/);
        assert.equal((await Sandbox.getInfo(sbx.sandboxId, c.conn)).state, 'paused');
      } finally {
        cli(['node', 'undrain', 'node-a']);
        await killSettled(sbx.sandboxId);
      }
    });

    it('svc node drain moves a running sandbox to the other node with its files; creates avoid the node until svc node undrain', async () => {
      const cli = (args: string[]) => execFileSync(process.execPath, [SVC, ...args, '--api-url', c.apiUrl, '--api-key', API_KEY, '--json'], { encoding: 'utf8' });
      const sbx = await Sandbox.create('base', c.conn);
      const [from, to] = await nodesOf(sbx.sandboxId);
      try {
        await sbx.files.write('/home/user/drained.txt', `made on node ${from}`);
        const report = JSON.parse(cli(['node', 'drain', `node-${from}`])) as { node: { status: string }; moved: string[]; failed: unknown[] };
        assert.equal(report.node.status, 'draining');
        assert.deepEqual(report.moved, [sbx.sandboxId]);
        assert.deepEqual(report.failed, []);
        const seenByB = (await json<{ state: string; moved: string[] }>(`${c.master('B')}/v1/nodes/node-${from}/drain`)).body;
        assert.deepEqual([seenByB.state, seenByB.moved], ['done', [sbx.sandboxId]], 'the other master answers for the drain: its course is in Redis');
        assert.equal((await json<{ nodeId: string; state: string }>(`${c.master('A')}/v1/sandboxes/${sbx.sandboxId}`)).body.nodeId, `node-${to}`);
        const moved = await Sandbox.connect(sbx.sandboxId, c.conn);
        assert.equal(await moved.files.read('/home/user/drained.txt'), `made on node ${from}`);
        // The drained node's copy is discarded after the move is acknowledged (move.ts): wait for it.
        await waitFor(`node ${from} keeps nothing of it`, async () => {
          const onFrom = await json<Array<{ sandboxId: string }>>(`${c.nodeUrl(from)}/v1/sandboxes`, { headers: NODE_HEADERS });
          return onFrom.body.some((x) => x.sandboxId === sbx.sandboxId) ? undefined : true;
        }, 30_000);
        const other = await Sandbox.create('base', c.conn);
        assert.equal((await json<{ nodeId: string }>(`${c.master('A')}/v1/sandboxes/${other.sandboxId}`)).body.nodeId, `node-${to}`, 'a draining node takes no create');
        await other.kill();
        assert.equal((JSON.parse(cli(['node', 'undrain', `node-${from}`])) as { status: string }).status, 'ready');
      } finally {
        // A failed assertion above must not leave the node drained for the tests after this one.
        try { cli(['node', 'undrain', `node-${from}`]); } catch (err) { console.error(`undrain node-${from}: ${String(err)}`); }
        await killSettled(sbx.sandboxId);
      }
    });

    it('the lifecycle leader killed with SIGKILL: the other replica takes the lease and pauses at the idle timeout', async () => {
      const leaderOf = async () => {
        for (const replica of [0, 1] as const) {
          const h = await json<{ leader: boolean }>(`${c.lifecycleUrl(replica)}/health`).catch(() => { /* this replica is down: not the leader */ return undefined; });
          if (h?.body.leader) return replica;
        }
        return undefined;
      };
      const leader = await waitFor('a lifecycle leader', leaderOf, 60_000);
      const sbx = await Sandbox.create('base', { ...c.conn, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } });
      try {
        c.kill(`lifecycle-${leader}`);
        await waitFor('the idle-timeout pause by the other replica', async () => ((await Sandbox.getInfo(sbx.sandboxId, c.conn)).state === 'paused' ? true : undefined), 60_000);
        assert.equal(await leaderOf(), leader === 0 ? 1 : 0);
      } finally {
        c.restartLifecycle(leader);
        await killSettled(sbx.sandboxId);
      }
      await waitFor(`lifecycle replica ${leader} back`, async () => ((await json(`${c.lifecycleUrl(leader)}/health`)).status === 200 ? true : undefined), 60_000);
    });

    it('a proxy killed with SIGKILL while its request auto-resumes a sandbox: the sandbox is not left stuck, and the other proxy reaches it', async () => {
      const sbx = await Sandbox.create('base', { ...c.conn, lifecycle: { onTimeout: 'pause', autoResume: true } });
      try {
        await sbx.files.write('/home/user/kept.txt', 'kept');
        await sbx.pause();
        // A request to envd through proxy 2 makes it ask for the auto-resume; proxy 2 dies under it.
        const traffic = fetch(`${c.proxy2Url}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } }).catch((e: Error) => e);
        await new Promise((r) => setTimeout(r, 150));
        c.kill('proxy-2');
        await traffic;
        const settled = await waitFor('the sandbox settled', async () => {
          const state = (await Sandbox.getInfo(sbx.sandboxId, c.conn)).state;
          return state === 'running' || state === 'paused' ? state : undefined;
        }, 60_000);
        assert.ok(settled === 'running' || settled === 'paused');
        const back = await Sandbox.connect(sbx.sandboxId, c.conn);
        assert.equal(await back.files.read('/home/user/kept.txt'), 'kept', 'nothing lost, through the first proxy');
      } finally {
        c.restartProxy2();
        await killSettled(sbx.sandboxId);
      }
      await waitFor('proxy 2 back', async () => ((await fetch(`${c.proxy2Url}/health`).catch(() => { /* not back yet */ return undefined; })) ? true : undefined), 60_000);
    });

    it('the lifecycle replicas pause a sandbox at its idle timeout, and a connect resumes it on its node', async () => {
      const sbx = await Sandbox.create('base', { ...c.conn, timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' }, nodeSelector: { zone: 'b' } });
      try {
        await sbx.files.write('/tmp/kept', 'kept');
        await waitFor('the idle-timeout pause', async () => ((await Sandbox.getInfo(sbx.sandboxId, c.conn)).state === 'paused' ? true : undefined), 60_000);
        const back = await Sandbox.connect(sbx.sandboxId, { ...c.conn, sandboxUrl: c.proxy2Url, timeoutMs: 120_000 });
        assert.equal(await back.files.read('/tmp/kept'), 'kept');
      } finally {
        await killSettled(sbx.sandboxId);
      }
    });

    it('creates hammered at both masters at once never put a node past its quota', async () => {
      const body = JSON.stringify({
        template: 'base', onTimeout: 'kill', autoResume: false, metadata: { hammer: '1' }, envVars: {}, secure: false,
        network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], memoryMB: 256, cpuCount: 1,
      });
      const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) =>
        json<{ sandboxId?: string; nodeId?: string; message?: string }>(`${c.master(i % 2 ? 'B' : 'A')}/v1/sandboxes`, { method: 'POST', body })));
      const made = outcomes.filter((o) => o.status === 201 || o.status === 200);
      const refused = outcomes.filter((o) => !(o.status === 201 || o.status === 200));
      for (const r of refused) assert.equal(r.status, 503, JSON.stringify(r.body));
      const perNode = (id: string) => made.filter((o) => o.body.nodeId === id).length;
      assert.ok(perNode('node-a') <= 4 && perNode('node-b') <= 4, `per node: a ${perNode('node-a')}, b ${perNode('node-b')} (each holds 4)`);
      assert.ok(made.length >= 6, `only ${made.length} of 12 were placed while 8 fit: ${JSON.stringify(refused.map((r) => r.body.message))}`);
      // What the nodes themselves run agrees.
      for (const [id, name] of [['node-a', 'a'], ['node-b', 'b']] as const) {
        const onNode = await json<Array<{ sandboxId: string }>>(`${c.nodeUrl(name)}/v1/sandboxes`, { headers: NODE_HEADERS });
        assert.equal(onNode.body.length, perNode(id));
      }
      await Promise.all(made.map((o) => deleteSandbox(c.master('A'), o.body.sandboxId!)));
    });
  });
}
