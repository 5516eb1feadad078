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
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { DatabaseConfig } from '@svc/common';
import { NODE_TOKEN_HEADER } from '@svc/contracts/node-agent';
import { CLUSTER_TOKEN_HEADER } from '@svc/contracts/cluster-token';
import { buildBaseRootfs } from '@svc/template-center';
import type { TestDatabase } from '@svc/master/testing/test-databases';
import { REPO, sandboxProcessesAll, waitFor } from './harness.ts';

const SVC = join(REPO, 'dist/svc.mjs');
export const REDIS_HOST = process.env.SVC_TEST_REDIS_HOST;
const REDIS_PORT = process.env.SVC_TEST_REDIS_PORT;
/** scripts/test-services.sh's Redis TLS port and the CA of its servers' certificates. */
const REDIS_TLS_PORT = process.env.SVC_TEST_REDIS_TLS_PORT;
const SERVICES_CA = process.env.SVC_TEST_TLS_CA;
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
  /**
   * cluster_tls: the components' own listeners serve HTTPS with a certificate of a CA made for
   * the cluster, and they reach the database (MySQL only) and Redis over TLS; each process trusts
   * both CAs through NODE_EXTRA_CA_CERTS (docs/cluster.md).
   */
  tls?: boolean;
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
    if (await freePort(p + 1).then(() => true, () => { /* the next port is taken: try another pair */ return false; })) return p;
  }
}

/** The CA of the running cluster's certificates (tls: true), which this process's own calls trust. */
let clusterCa: Buffer | undefined;

/** cluster_token of every component: the masters and the lifecycle replicas take nothing without it. */
const CLUSTER_TOKEN = 'cluster-internal';

/**
 * A call to a component, with cluster_token (a test that means to go without it sends its own
 * value of the header); an https:// one trusts the cluster's CA.
 */
function call(url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}, timeoutMs = 120_000): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = send(url, { method: init.method ?? 'GET', headers: { [CLUSTER_TOKEN_HEADER]: CLUSTER_TOKEN, ...init.headers }, timeout: timeoutMs, ...(clusterCa ? { ca: clusterCa } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(init.body);
  });
}

/** node_agent.token of the cluster's masters and node agents. */
const NODE_TOKEN = 'cluster-node';
/** What a test's own call to a node agent carries. */
export const NODE_HEADERS = { [NODE_TOKEN_HEADER]: NODE_TOKEN };

export async function json<T>(url: string, init: { method?: string; body?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; body: T }> {
  const r = await call(url, { ...init, headers: { 'content-type': 'application/json', ...init.headers } });
  return { status: r.status, body: JSON.parse(r.text || 'null') as T };
}

/** A DELETE of a sandbox through a master. */
export async function deleteSandbox(masterUrl: string, id: string): Promise<void> {
  await call(`${masterUrl}/v1/sandboxes/${id}`, { method: 'DELETE' });
}

const ok = async (url: string) => ((await call(url, {}, 2_000)).status === 200 ? true : undefined);

export class Cluster {
  readonly ports: Record<string, number> = {};
  private readonly procs: Proc[] = [];

  private constructor(private readonly o: ClusterOptions) {
    this.database = o.db.config;
  }

  static async start(o: ClusterOptions): Promise<Cluster> {
    const c = new Cluster(o);
    try {
      await c.bringUp();
    } catch (err) {
      // Nothing of a cluster that did not come up may go on (its lifecycle replicas would hold the next one's lease).
      await c.stopProcesses();
      throw new Error(`${(err as Error).message}; logs in ${o.dir}`);
    }
    return c;
  }

  /** http, or https with tls. */
  get scheme(): string { return this.o.tls ? 'https' : 'http'; }
  master(which: 'A' | 'B'): string { return `${this.scheme}://127.0.0.1:${this.ports[`master${which}`]}`; }
  get apiUrl(): string { return `http://127.0.0.1:${this.ports.api}`; }
  get proxyUrl(): string { return `http://127.0.0.1:${this.ports.proxy}`; }
  get proxy2Url(): string { return `http://127.0.0.1:${this.ports.proxy2}`; }
  nodeUrl(name: 'a' | 'b'): string { return `${this.scheme}://127.0.0.1:${this.ports[`node${name}`]}`; }
  lifecycleUrl(replica: 0 | 1): string { return `${this.scheme}://127.0.0.1:${this.ports.lifecycle + replica}`; }
  nodeStateDir(name: 'a' | 'b'): string { return join(this.o.dir, `node-${name}`); }
  /** The SDK's and CLI's connection to the cluster. */
  get conn() { return { apiUrl: this.apiUrl, apiKey: API_KEY, sandboxUrl: this.proxyUrl, timeoutMs: 120_000 }; }

  /** Kills a node agent with SIGKILL (its sandboxes keep running, as on a crash). */
  killNode(name: 'a' | 'b'): void {
    this.kill(`node-${name}`);
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
    const list = await json<{ sandboxes?: Array<{ sandboxId: string }> }>(`${this.master('A')}/v1/sandboxes?limit=1000`).catch(() => { /* master A is down: its node agents stop below */ return undefined; });
    const ids = (list?.body.sandboxes ?? []).map((s) => s.sandboxId);
    await Promise.all(ids.map((id) => deleteSandbox(this.master('A'), id).catch(() => { /* best effort: the processes stop next */ })));
    await this.stopProcesses();
    await this.o.db.drop();
    clusterCa = undefined;
    assert.deepEqual(sandboxProcessesAll().filter((l) => l.includes(this.o.dir)), [], 'no sandbox process of the cluster is left');
  }

  /** SIGTERM to every process, newest first; SIGKILL to one that has not ended after 30 s. */
  private async stopProcesses(): Promise<void> {
    for (const p of [...this.procs].reverse()) {
      if (p.child.exitCode !== null || p.child.signalCode !== null) continue;
      const exited = new Promise((r) => p.child.once('exit', r));
      p.child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
    }
  }

  /** A component's configuration file (JSON, which YAML reads): the shared keys, then its own. */
  private config(over: Record<string, unknown>): string {
    return JSON.stringify({
      api: { listen: `127.0.0.1:${this.ports.api}`, api_key: API_KEY },
      master: this.masterSection('A'),
      redis: this.o.tls ? { host: REDIS_HOST, port: Number(REDIS_TLS_PORT), db: REDIS_DB, tls: true } : { host: REDIS_HOST, port: Number(REDIS_PORT), db: REDIS_DB },
      template_center: { listen: `127.0.0.1:${this.ports.tc}`, callback_token: 'cluster-callback' },
      proxy: { http_port: this.ports.proxy, admin_port: this.ports.proxyAdmin, admin_token: 'cluster-proxy' },
      svcproxy: { admin_token: 'cluster-proxy' },
      // The masters send it to the node agents, which take nothing without it.
      node_agent: { token: NODE_TOKEN },
      cluster_token: CLUSTER_TOKEN,
      lifecycle: { replicas: 2, listen: `127.0.0.1:${this.ports.lifecycle}` },
      egress: { enabled: false },
      ...(this.o.tls ? { cluster_tls: { cert_file: join(this.o.dir, 'tls', 'cluster.pem'), key_file: join(this.o.dir, 'tls', 'cluster.key') } } : {}),
      ...over,
    });
  }

  /** The masters' database settings: the test database's, or with tls an account MariaDB serves over TLS only. */
  private database: DatabaseConfig;

  /** Both masters share the database and the vault key the first made (docs/cluster.md). */
  private masterSection(which: 'A' | 'B') {
    const port = this.ports[`master${which}`];
    return {
      listen: `127.0.0.1:${port}`, addr: `${this.scheme}://127.0.0.1:${port}`, upload_signing_key: 'cluster-upload-key',
      database: this.database,
      node_lost_after_sec: this.o.nodeLostAfterSec,
      ...(which === 'B' ? { vault_key_file: join(this.o.dir, 'data-master-a', 'vault', 'key.json') } : {}),
    };
  }

  private start(name: string, args: string[], cfg: string): void {
    const file = join(this.o.dir, `${name}.yaml`);
    writeFileSync(file, cfg);
    const log = join(this.o.dir, `${name}.log`);
    const out = createWriteStream(log, { flags: 'a' });
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...(this.o.tls ? { NODE_EXTRA_CA_CERTS: join(this.o.dir, 'tls', 'trust.pem') } : {}) };
    const child = spawn(process.execPath, [SVC, ...args, '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], env });
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
        listen: `127.0.0.1:${this.ports[`node${name}`]}`, node_id: `node-${name}`, labels: `zone=${name}`, runtime: 'gvisor', token: NODE_TOKEN,
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
    if (this.o.tls) {
      if (!REDIS_TLS_PORT || !SERVICES_CA) throw new Error('SVC_TEST_REDIS_TLS_PORT and SVC_TEST_TLS_CA are not set (run scripts/test-services.sh start)');
      clusterCa = makeClusterCertificate(join(dir, 'tls'));
      writeFileSync(join(dir, 'tls', 'trust.pem'), Buffer.concat([clusterCa, readFileSync(SERVICES_CA)]));
      this.database = await tlsOnlyAccount(this.o.db.config);
    }

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
    for (const replica of [0, 1] as const) await waitFor(`lifecycle replica ${replica}`, () => ok(`${this.lifecycleUrl(replica)}/health`), 60_000);
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

/**
 * A CA made for the cluster and one certificate it signs for 127.0.0.1 and localhost, which
 * every component serves (cluster_tls): openssl, from scripts/install-system-deps.sh.
 */
function makeClusterCertificate(dir: string): Buffer {
  mkdirSync(dir, { recursive: true });
  const ossl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  ossl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=svc cluster test CA']);
  ossl(['req', ...ec, '-keyout', 'cluster.key', '-out', 'cluster.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(join(dir, 'san.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  ossl(['x509', '-req', '-in', 'cluster.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cluster.pem', '-days', '2', '-extfile', 'san.cnf']);
  return readFileSync(join(dir, 'ca.pem'));
}

/**
 * With cluster_tls on MariaDB: an account of the test database that the server admits over TLS
 * only (REQUIRE SSL), so a master that did not speak TLS to it could not start.
 */
async function tlsOnlyAccount(db: DatabaseConfig): Promise<DatabaseConfig> {
  if (db.driver !== 'mysql') return db;
  const my = await import('mysql2/promise');
  const admin = await my.createConnection({ host: db.host, port: db.port, user: db.user, password: db.password });
  try {
    await admin.query("CREATE USER IF NOT EXISTS 'svc_tls_only'@'127.0.0.1' IDENTIFIED BY 'svc_tls_only' REQUIRE SSL");
    await admin.query(`GRANT ALL PRIVILEGES ON \`${db.database}\`.* TO 'svc_tls_only'@'127.0.0.1'`);
  } finally {
    await admin.end();
  }
  return { ...db, user: 'svc_tls_only', password: 'svc_tls_only', tls: true };
}
