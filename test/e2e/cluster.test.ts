/**
 * A cluster on one machine (docs/cluster.md), every component a process of its own started as an
 * operator starts it (`svc <component> --config FILE`): two masters on one PostgreSQL and one
 * Redis, an API gateway, a template center, a data-plane proxy, and two node agents with their
 * own state, address pools, ports and labels, each registered with a different master.
 *
 * What it shows: both nodes register with their runtimes and labels (`svc node list`); a
 * create's nodeSelector picks the node, and the proxy reaches a sandbox on either; creates
 * hammered at both masters at once never put a node past its quota; a node killed with SIGKILL
 * has its running sandboxes reported lost, and removes them when it returns.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Sandbox } from '@svc/sdk';
import { buildBaseRootfs } from '@svc/template-center';
import { availableTestDatabases, type TestDatabase } from '@svc/master/testing/test-databases';
import { REPO, sandboxProcessesAll } from './harness.ts';

const SVC = join(REPO, 'dist/svc.mjs');
const REDIS_HOST = process.env.SVC_TEST_REDIS_HOST;
const REDIS_PORT = process.env.SVC_TEST_REDIS_PORT;
const skipAll = !REDIS_HOST ? 'Redis is not running (scripts/test-services.sh start)' : process.getuid?.() !== 0 ? 'node agents run as root' : false;

const DIR = '/tmp/svc-e2e-cluster';
const API_KEY = 'cluster-test-key';
const REDIS_DB = 11;

interface Proc { name: string; child: ChildProcess; log: string }
let procs: Proc[] = [];
let db: TestDatabase | undefined;
let ports: Record<string, number> = {};

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address() as { port: number }; s.close(() => res(port)); });
  });
}

/** A component's configuration file (JSON, which YAML reads): the shared keys, then its own. */
function config(over: Record<string, unknown>): string {
  return JSON.stringify({
    api: { listen: `127.0.0.1:${ports.api}`, api_key: API_KEY },
    master: {
      listen: `127.0.0.1:${ports.masterA}`, addr: `http://127.0.0.1:${ports.masterA}`,
      database: db!.config, upload_signing_key: 'cluster-upload-key',
      // Node loss is told sooner than the default 30 s, so the test does not wait as long.
      node_lost_after_sec: 6,
    },
    redis: { host: REDIS_HOST, port: Number(REDIS_PORT), db: REDIS_DB },
    template_center: { listen: `127.0.0.1:${ports.tc}`, callback_token: 'cluster-callback' },
    proxy: { http_port: ports.proxy, admin_port: ports.proxyAdmin, admin_token: 'cluster-proxy' },
    svcproxy: { admin_token: 'cluster-proxy' },
    lifecycle: { replicas: 1, listen: `127.0.0.1:${ports.lifecycle}` },
    egress: { enabled: false },
    ...over,
  });
}

function start(name: string, args: string[], cfg: string): Proc {
  const file = join(DIR, `${name}.yaml`);
  writeFileSync(file, cfg);
  const log = join(DIR, `${name}.log`);
  const out = createWriteStream(log);
  const child = spawn(process.execPath, [SVC, ...args, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, HOME: process.env.HOME } });
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const p = { name, child, log };
  procs.push(p);
  return p;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; logs in ${DIR}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const ok = async (url: string) => ((await fetch(url, { signal: AbortSignal.timeout(2_000) })).ok ? true : undefined);
const master = (which: 'masterA' | 'masterB') => `http://127.0.0.1:${ports[which]}`;

async function json<T>(url: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  const r = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init?.headers }, signal: AbortSignal.timeout(120_000) });
  return { status: r.status, body: await r.json() as T };
}

function node(name: 'a' | 'b', masterPort: number, pool: string): string {
  return config({
    master: {
      listen: `127.0.0.1:${masterPort}`, addr: `http://127.0.0.1:${masterPort}`,
      database: db!.config,
    },
    node_agent: {
      listen: `127.0.0.1:${ports[`node${name}`]}`, node_id: `node-${name}`, labels: `zone=${name}`, runtime: 'gvisor',
      address_pool: pool, state_dir: join(DIR, `node-${name}`), warm_pool_size: 0, warm_pool_initial: 0,
      // Room for four sandboxes of 256 MB each: what the hammer below fills.
      capacity: { cpu_count: 2, memory_mb: 1024 }, host: { quota: { memory_overcommit: 1 } },
    },
    data_dir: join(DIR, `data-node-${name}`),
  });
}

async function startCluster(engine: { create?: () => Promise<TestDatabase> }): Promise<void> {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(DIR, { recursive: true });
  procs = [];
  ports = {};
  for (const k of ['api', 'masterA', 'masterB', 'tc', 'proxy', 'proxyAdmin', 'lifecycle', 'nodea', 'nodeb']) ports[k] = await freePort();
  db = await engine.create!();
  execFileSync('redis-cli', ['-h', REDIS_HOST!, '-p', REDIS_PORT!, '-n', String(REDIS_DB), 'flushdb']);

  start('master-a', ['master'], config({ data_dir: join(DIR, 'data-master-a') }));
  await until('master A', () => ok(`${master('masterA')}/notify/health`));
  // The second master on the same database and Redis, once the first has applied the migrations,
  // with the vault key the first made (docs/cluster.md: the same file on every master).
  start('master-b', ['master'], config({
    data_dir: join(DIR, 'data-master-b'),
    master: {
      listen: `127.0.0.1:${ports.masterB}`, addr: `http://127.0.0.1:${ports.masterB}`,
      database: db!.config, upload_signing_key: 'cluster-upload-key', vault_key_file: join(DIR, 'data-master-a', 'vault', 'key.json'), node_lost_after_sec: 6,
    },
  }));
  start('template-center', ['template-center'], config({ data_dir: join(DIR, 'data-tc') }));
  start('api', ['api'], config({ data_dir: join(DIR, 'data-api') }));
  start('proxy', ['proxy'], config({ data_dir: join(DIR, 'data-proxy') }));
  start('node-a', ['node-agent'], node('a', ports.masterA, '10.214.0.0/24'));
  start('node-b', ['node-agent'], node('b', ports.masterB, '10.214.1.0/24'));
  await until('master B', () => ok(`${master('masterB')}/notify/health`));
  await until('the API gateway', () => ok(`http://127.0.0.1:${ports.api}/health`));
  await until('both nodes registered', async () => {
    const { body } = await json<Array<{ nodeId: string; status: string }>>(`${master('masterA')}/v1/nodes`);
    return body.filter((n) => n.status === 'ready').length === 2 ? true : undefined;
  });

  // The base template, built by the template center from Debian's packages (cached machine-wide).
  const tar = await buildBaseRootfs({ flavor: 'base' });
  const created = await json<{ template_id: string; job_id: string }>(`${master('masterA')}/svc/template`, { method: 'POST', body: JSON.stringify({ rootfs_tar: tar.path, alias: 'base' }) });
  assert.equal(created.status, 202, JSON.stringify(created.body));
  await until('the base template', async () => {
    const { body } = await json<{ status: string; error?: string }>(`${master('masterA')}/svc/template/build/${created.body.job_id}/status`);
    if (body.status === 'FAILED') throw new Error(`base template failed: ${body.error}`);
    return body.status === 'BUILT' ? true : undefined;
  }, 300_000);
}

async function stopCluster(): Promise<void> {
  // Every sandbox goes first; node agents leave theirs running when they stop.
  const list = await json<{ sandboxes?: Array<{ sandboxId: string }> } | Array<{ sandboxId: string }>>(`${master('masterA')}/v1/sandboxes?limit=1000`).catch(() => undefined);
  const ids = list ? (Array.isArray(list.body) ? list.body : list.body.sandboxes ?? []).map((s) => s.sandboxId) : [];
  await Promise.all(ids.map((id) => fetch(`${master('masterA')}/v1/sandboxes/${id}`, { method: 'DELETE' }).catch(() => undefined)));
  for (const p of procs.reverse()) {
    if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
    const exited = new Promise((r) => p.child.once('exit', r));
    p.child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
    if (p.child.exitCode === null) p.child.kill('SIGKILL');
  }
  await db?.drop();
  const left = sandboxProcessesAll().filter((l) => l.includes(DIR));
  assert.deepEqual(left, [], 'no sandbox process of the cluster is left');
}

// The cluster on each external engine SPEC.md names for its state, always with Redis.
for (const engine of availableTestDatabases().filter((e) => e.driver !== 'sqlite')) {
  const skip = skipAll || engine.skip || false;
  describe(`a cluster on ${engine.driver} and Redis`, { skip }, () => {
    before(() => startCluster(engine));
    after(() => stopCluster());

    it('two nodes, two masters: registration, labels and runtimes, placement by selector, the proxy reaches either node', async () => {
      const cli = (args: string[]) => execFileSync(process.execPath, [SVC, ...args, '--api-url', `http://127.0.0.1:${ports.api}`, '--api-key', API_KEY, '--json'], { encoding: 'utf8' });
      const nodes = JSON.parse(cli(['node', 'list'])) as Array<{ id: string; labels: Record<string, string>; runtimes?: string[] }>;
      assert.deepEqual(nodes.map((n) => [n.id, n.labels.zone, n.runtimes]).sort(), [['node-a', 'a', ['gvisor']], ['node-b', 'b', ['gvisor']]]);

      const conn = { apiUrl: `http://127.0.0.1:${ports.api}`, apiKey: API_KEY, sandboxUrl: `http://127.0.0.1:${ports.proxy}`, timeoutMs: 120_000 };
      for (const zone of ['a', 'b'] as const) {
        const sbx = await Sandbox.create('base', { ...conn, nodeSelector: { zone } });
        try {
          const { body } = await json<{ nodeId: string }>(`${master('masterB')}/v1/sandboxes/${sbx.sandboxId}`);
          assert.equal(body.nodeId, `node-${zone}`, 'placed on the node with the label; the other master sees it too');
          assert.equal((await sbx.commands.run('echo hello from $ZONE', { envs: { ZONE: zone } })).stdout, `hello from ${zone}\n`);
        } finally {
          await sbx.kill();
        }
      }
      await assert.rejects(Sandbox.create('base', { ...conn, nodeSelector: { zone: 'c' } }), (e: Error) => /no node has labels zone=c/.test(e.message));
    });

    it('a node killed with SIGKILL: its running sandbox is reported lost, creates go to the other node, and the node removes it when it returns', async (t) => {
      const conn = { apiUrl: `http://127.0.0.1:${ports.api}`, apiKey: API_KEY, sandboxUrl: `http://127.0.0.1:${ports.proxy}`, timeoutMs: 120_000 };
      const sbx = await Sandbox.create('base', { ...conn, nodeSelector: { zone: 'b' } });
      const nodeB = procs.find((p) => p.name === 'node-b' && p.child.exitCode === null && p.child.signalCode === null)!;
      const killedAt = Date.now();
      nodeB.child.kill('SIGKILL');
      const lost = await until('the sandbox reported lost', async () => {
        const r = await json<{ message: string }>(`${master('masterA')}/v1/sandboxes/${sbx.sandboxId}`);
        return r.status === 410 ? r.body.message : undefined;
      });
      t.diagnostic(`reported lost ${Date.now() - killedAt} ms after the kill (node_lost_after_sec 6, swept every 5 s)`);
      assert.match(lost, /lost with its node node-b/);
      const elsewhere = await Sandbox.create('base', conn);
      assert.equal((await json<{ nodeId: string }>(`${master('masterA')}/v1/sandboxes/${elsewhere.sandboxId}`)).body.nodeId, 'node-a');
      await elsewhere.kill();

      // It comes back: it adopts what still runs there, and the master has it remove the sandbox it reported lost.
      start('node-b', ['node-agent'], node('b', ports.masterB, '10.214.1.0/24'));
      await until('node b back, with nothing of the lost sandbox left', async () => {
        const onNode = await json<Array<{ sandboxId: string }>>(`http://127.0.0.1:${ports.nodeb}/v1/sandboxes`);
        return onNode.status === 200 && onNode.body.length === 0 ? true : undefined;
      });
      assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(join(DIR, 'node-b'))), []);
    });

    it('creates hammered at both masters at once never put a node past its quota', async () => {
      const body = JSON.stringify({
        template: 'base', onTimeout: 'kill', autoResume: false, metadata: { hammer: '1' }, envVars: {}, secure: false,
        network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], memoryMB: 256, cpuCount: 1,
      });
      const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) =>
        json<{ sandboxId?: string; nodeId?: string; message?: string }>(`${master(i % 2 ? 'masterB' : 'masterA')}/v1/sandboxes`, { method: 'POST', body })));
      const made = outcomes.filter((o) => o.status === 201 || o.status === 200);
      const refused = outcomes.filter((o) => !(o.status === 201 || o.status === 200));
      for (const r of refused) assert.equal(r.status, 503, JSON.stringify(r.body));
      const perNode = (id: string) => made.filter((o) => o.body.nodeId === id).length;
      assert.ok(perNode('node-a') <= 4 && perNode('node-b') <= 4, `per node: a ${perNode('node-a')}, b ${perNode('node-b')} (each holds 4)`);
      assert.ok(made.length >= 6, `only ${made.length} of 12 were placed while 8 fit: ${JSON.stringify(refused.map((r) => r.body.message))}`);
      // What the nodes themselves run agrees.
      for (const [id, name] of [['node-a', 'a'], ['node-b', 'b']] as const) {
        const onNode = await json<Array<{ sandboxId: string }>>(`http://127.0.0.1:${ports[`node${name}`]}/v1/sandboxes`);
        assert.equal(onNode.body.length, perNode(id));
      }
      await Promise.all(made.map((o) => fetch(`${master('masterA')}/v1/sandboxes/${o.body.sandboxId}`, { method: 'DELETE' })));
    });
  });
}
