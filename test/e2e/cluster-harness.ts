/**
 * A cluster on one machine (docs/cluster.md), every component a process of its own started as an
 * operator starts it (`svc <component> --config FILE`): two masters on one database and one
 * Redis, an API gateway, a template center, two data-plane proxies, two lifecycle replicas, and
 * two node agents (labels
 * zone=a and zone=b) with their own state, address pools and ports, each registered with a
 * different master. For test/e2e/cluster.test.ts and bench/cluster.ts.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { buildBaseRootfs } from '@svc/template-center';
import type { TestDatabase } from '@svc/master/testing/test-databases';
import { REPO, sandboxProcessesAll, waitFor } from './harness.ts';

const SVC = join(REPO, 'dist/svc.mjs');
export const REDIS_HOST = process.env.SVC_TEST_REDIS_HOST;
const REDIS_PORT = process.env.SVC_TEST_REDIS_PORT;
export const API_KEY = 'cluster-test-key';
const REDIS_DB = 11;

export interface ClusterOptions {
  dir: string;
  /** The masters' database, made for this cluster and dropped at its stop. */
  db: TestDatabase;
  /** Each node agent's capacity (node_agent.capacity.memory_mb, memory_overcommit 1); 0: the host's. */
  nodeMemoryMB: number;
  /** master.node_lost_after_sec. */
  nodeLostAfterSec: number;
}

interface Proc { name: string; child: ChildProcess; log: string }

async function freePort(port = 0): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(port, '127.0.0.1', () => { const { port: got } = s.address() as { port: number }; s.close(() => res(got)); });
  });
}

/** Two free ports in a row: lifecycle replica i listens on lifecycle.listen's port plus i. */
async function freePortPair(): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (await freePort(p + 1).then(() => true, () => false)) return p;
  }
}

export async function json<T>(url: string, init?: RequestInit): Promise<{ status: number; body: T }> {
  const r = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...init?.headers }, signal: AbortSignal.timeout(120_000) });
  return { status: r.status, body: await r.json() as T };
}

const ok = async (url: string) => ((await fetch(url, { signal: AbortSignal.timeout(2_000) })).ok ? true : undefined);

export class Cluster {
  readonly ports: Record<string, number> = {};
  private readonly procs: Proc[] = [];

  private constructor(private readonly o: ClusterOptions) {}

  static async start(o: ClusterOptions): Promise<Cluster> {
    const c = new Cluster(o);
    try {
      await c.bringUp();
    } catch (err) {
      throw new Error(`${(err as Error).message}; logs in ${o.dir}`);
    }
    return c;
  }

  master(which: 'A' | 'B'): string { return `http://127.0.0.1:${this.ports[`master${which}`]}`; }
  get apiUrl(): string { return `http://127.0.0.1:${this.ports.api}`; }
  get proxyUrl(): string { return `http://127.0.0.1:${this.ports.proxy}`; }
  get proxy2Url(): string { return `http://127.0.0.1:${this.ports.proxy2}`; }
  nodeUrl(name: 'a' | 'b'): string { return `http://127.0.0.1:${this.ports[`node${name}`]}`; }
  nodeStateDir(name: 'a' | 'b'): string { return join(this.o.dir, `node-${name}`); }
  /** The SDK's and CLI's connection to the cluster. */
  get conn() { return { apiUrl: this.apiUrl, apiKey: API_KEY, sandboxUrl: this.proxyUrl, timeoutMs: 120_000 }; }

  /** Kills a node agent with SIGKILL (its sandboxes keep running, as on a crash). */
  killNode(name: 'a' | 'b'): void {
    this.procs.find((p) => p.name === `node-${name}` && p.child.exitCode === null && p.child.signalCode === null)!.child.kill('SIGKILL');
  }

  /** Starts a node agent again on its state. */
  restartNode(name: 'a' | 'b'): void {
    this.startNode(name);
  }

  /** SIGKILLs a running component by its process name (lifecycle-0, proxy-2, ...). */
  kill(name: string): void {
    this.procs.find((p) => p.name === name && p.child.exitCode === null && p.child.signalCode === null)!.child.kill('SIGKILL');
  }

  /** Starts a lifecycle replica again. */
  restartLifecycle(replica: 0 | 1): void {
    this.start(`lifecycle-${replica}`, ['lifecycle', '--replica', String(replica)], this.config({ data_dir: join(this.o.dir, `data-lifecycle-${replica}`) }));
  }

  /** Starts the second proxy again. */
  restartProxy2(): void {
    this.start('proxy-2', ['proxy'], this.proxy2Config());
  }

  /** Deletes every sandbox, stops every process, drops the database; asserts no sandbox process is left. */
  async stop(): Promise<void> {
    // Every sandbox goes first; node agents leave theirs running when they stop.
    const list = await json<{ sandboxes?: Array<{ sandboxId: string }> }>(`${this.master('A')}/v1/sandboxes?limit=1000`).catch(() => undefined);
    const ids = (list?.body.sandboxes ?? []).map((s) => s.sandboxId);
    await Promise.all(ids.map((id) => fetch(`${this.master('A')}/v1/sandboxes/${id}`, { method: 'DELETE' }).catch(() => undefined)));
    for (const p of this.procs.reverse()) {
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      const exited = new Promise((r) => p.child.once('exit', r));
      p.child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
    }
    await this.o.db.drop();
    assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(this.o.dir)), [], 'no sandbox process of the cluster is left');
  }

  /** A component's configuration file (JSON, which YAML reads): the shared keys, then its own. */
  private config(over: Record<string, unknown>): string {
    return JSON.stringify({
      api: { listen: `127.0.0.1:${this.ports.api}`, api_key: API_KEY },
      master: this.masterSection('A'),
      redis: { host: REDIS_HOST, port: Number(REDIS_PORT), db: REDIS_DB },
      template_center: { listen: `127.0.0.1:${this.ports.tc}`, callback_token: 'cluster-callback' },
      proxy: { http_port: this.ports.proxy, admin_port: this.ports.proxyAdmin, admin_token: 'cluster-proxy' },
      svcproxy: { admin_token: 'cluster-proxy' },
      lifecycle: { replicas: 2, listen: `127.0.0.1:${this.ports.lifecycle}` },
      egress: { enabled: false },
      ...over,
    });
  }

  /** Both masters share the database and the vault key the first made (docs/cluster.md). */
  private masterSection(which: 'A' | 'B') {
    const port = this.ports[`master${which}`];
    return {
      listen: `127.0.0.1:${port}`, addr: `http://127.0.0.1:${port}`, database: this.o.db.config, upload_signing_key: 'cluster-upload-key',
      node_lost_after_sec: this.o.nodeLostAfterSec,
      ...(which === 'B' ? { vault_key_file: join(this.o.dir, 'data-master-a', 'vault', 'key.json') } : {}),
    };
  }

  private start(name: string, args: string[], cfg: string): void {
    const file = join(this.o.dir, `${name}.yaml`);
    writeFileSync(file, cfg);
    const log = join(this.o.dir, `${name}.log`);
    const out = createWriteStream(log, { flags: 'a' });
    const child = spawn(process.execPath, [SVC, ...args, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH, HOME: process.env.HOME } });
    child.stdout!.pipe(out);
    child.stderr!.pipe(out);
    this.procs.push({ name, child, log });
  }

  private proxy2Config(): string {
    return this.config({
      data_dir: join(this.o.dir, 'data-proxy-2'), proxy: { http_port: this.ports.proxy2, admin_port: this.ports.proxyAdmin2, admin_token: 'cluster-proxy' },
    });
  }

  private startNode(name: 'a' | 'b'): void {
    this.start(`node-${name}`, ['node-agent'], this.config({
      // Node a registers with master A, node b with master B.
      master: this.masterSection(name === 'a' ? 'A' : 'B'),
      node_agent: {
        listen: `127.0.0.1:${this.ports[`node${name}`]}`, node_id: `node-${name}`, labels: `zone=${name}`, runtime: 'gvisor',
        address_pool: name === 'a' ? '10.214.0.0/24' : '10.214.1.0/24', state_dir: this.nodeStateDir(name), warm_pool_size: 0, warm_pool_initial: 0,
        capacity: { cpu_count: 0, memory_mb: this.o.nodeMemoryMB }, host: { quota: { memory_overcommit: 1 } },
      },
      data_dir: join(this.o.dir, `data-node-${name}`),
    }));
  }

  private async bringUp(): Promise<void> {
    const dir = this.o.dir;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const k of ['api', 'masterA', 'masterB', 'tc', 'proxy', 'proxyAdmin', 'proxy2', 'proxyAdmin2', 'nodea', 'nodeb']) this.ports[k] = await freePort();
    this.ports.lifecycle = await freePortPair();
    execFileSync('redis-cli', ['-h', REDIS_HOST!, '-p', REDIS_PORT!, '-n', String(REDIS_DB), 'flushdb']);

    this.start('master-a', ['master'], this.config({ data_dir: join(dir, 'data-master-a') }));
    await waitFor('master A', () => ok(`${this.master('A')}/notify/health`), 60_000);
    // The second master once the first has applied the migrations.
    this.start('master-b', ['master'], this.config({ data_dir: join(dir, 'data-master-b'), master: this.masterSection('B') }));
    this.start('template-center', ['template-center'], this.config({ data_dir: join(dir, 'data-tc') }));
    this.start('api', ['api'], this.config({ data_dir: join(dir, 'data-api') }));
    this.start('proxy', ['proxy'], this.config({ data_dir: join(dir, 'data-proxy') }));
    this.start('proxy-2', ['proxy'], this.proxy2Config());
    for (const replica of [0, 1]) this.start(`lifecycle-${replica}`, ['lifecycle', '--replica', String(replica)], this.config({ data_dir: join(dir, `data-lifecycle-${replica}`) }));
    this.startNode('a');
    this.startNode('b');
    await waitFor('master B', () => ok(`${this.master('B')}/notify/health`), 60_000);
    await waitFor('the API gateway', () => ok(`${this.apiUrl}/health`), 60_000);
    for (const replica of [0, 1]) await waitFor(`lifecycle replica ${replica}`, () => ok(`http://127.0.0.1:${this.ports.lifecycle + replica}/health`), 60_000);
    await waitFor('both nodes registered', async () => {
      const { body } = await json<Array<{ nodeId: string; status: string }>>(`${this.master('A')}/v1/nodes`);
      return body.filter((n) => n.status === 'ready').length === 2 ? true : undefined;
    }, 60_000);

    // The base template, built by the template center from Debian's packages (cached machine-wide).
    const tar = await buildBaseRootfs({ flavor: 'base' });
    const created = await json<{ template_id: string; job_id: string }>(`${this.master('A')}/svc/template`, { method: 'POST', body: JSON.stringify({ rootfs_tar: tar.path, alias: 'base' }) });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await waitFor('the base template', async () => {
      const { body } = await json<{ status: string; error?: string }>(`${this.master('A')}/svc/template/build/${created.body.job_id}/status`);
      if (body.status === 'FAILED') throw new Error(`base template failed: ${body.error}`);
      return body.status === 'BUILT' ? true : undefined;
    }, 300_000);
  }
}
