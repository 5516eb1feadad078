/**
 * One master's template module over a real database, with a fake template center and fake node
 * agents on loopback. Several harnesses can share a database and a template center (two masters).
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { createHttpApp, defaultConfig, freePort, MemoryCoordination, silentLogger, type Coordination, type DatabaseConfig, type SvcConfig } from '@svc/common';
import { openDatabase, type Db } from '../../db/connect.ts';
import { migrate } from '../../db/migrator.ts';
import type { Database } from '../../db/schema.ts';
import { migrations } from '../../migrations/index.ts';
import { NodeRegistry } from '../../nodes/registry.ts';
import { startTemplates, type TemplatesRuntime } from '../index.ts';
import { guardOwnedRoutes } from '../../teams/ownership.ts';
import { masterOwnedRoutes } from '../../teams/guards.ts';
import { FakeArtifactNode } from './fake-node-agent.ts';
import { FakeTemplateCenter } from './fake-template-center.ts';
import { BuildRepo } from '../../builds/repo.ts';
import { registerBuildRoutes } from '../../builds/routes.ts';
import { BuildService } from '../../builds/service.ts';
import { TeamBuilds } from '../../builds/team-builds.ts';
import { NO_LIMITS } from '@svc/contracts/teams';
import { newVaultKeyFile, Vault } from '../../vault/vault.ts';
import { lateBuilderStatus } from '../../builds/status-port.ts';
import { fakes } from '../../builds/testing/fake-ports.ts';

export interface HarnessOptions {
  database: DatabaseConfig;
  /** Token configured on the master (default 'cb-token'); '' = unset. */
  token?: string;
  insecureNoToken?: boolean;
  staleAfterSec?: number;
  graceMs?: number;
  /** Share a template center (and its call log) with another harness. */
  templateCenter?: FakeTemplateCenter;
  coordination?: Coordination;
  /** Runs E2B's template builder too (its routes, wired as the master wires it), its sandboxes and snapshots fakes. */
  builder?: boolean;
  /** Teams' maxConcurrentBuilds, counted over both kinds of build as the master counts them. */
  maxConcurrentBuilds?: Record<string, number>;
}

export interface Reply<T = any> { status: number; body: T; headers: Headers }

export class Harness {
  url = '';
  cfg!: SvcConfig;
  db!: Db;
  app!: FastifyInstance;
  nodes!: NodeRegistry;
  module!: TemplatesRuntime;
  tc!: FakeTemplateCenter;
  coordination!: Coordination;
  /** The builder, when the harness runs one (HarnessOptions.builder). */
  builds?: BuildService;
  /** The builder's fake sandboxes, nodes and snapshots (a step's exit code, a step held running). */
  builderFakes?: ReturnType<typeof fakes>;
  readonly fakeNodes: FakeArtifactNode[] = [];
  private ownsTc = false;

  static async start(o: HarnessOptions): Promise<Harness> {
    const h = new Harness();
    const token = o.token ?? 'cb-token';
    h.ownsTc = !o.templateCenter;
    h.tc = o.templateCenter ?? await new FakeTemplateCenter(token).start();
    const port = await freePort();
    h.url = `http://127.0.0.1:${port}`;
    h.cfg = defaultConfig('/tmp/svc-templates-test');
    h.cfg.master.addr = h.url;
    h.cfg.master.database = o.database;
    h.cfg.template_center.addr = h.tc.url;
    h.cfg.template_center.callback_token = token;
    h.cfg.template_center.insecure_no_token = o.insecureNoToken ?? false;
    h.cfg.template_center.reconcile.stale_after_sec = o.staleAfterSec ?? 300;
    h.db = await openDatabase(o.database);
    await migrate(h.db.kysely, h.db.driver, migrations);
    // createHttpApp raises its logger to warn; this one writes nowhere.
    h.app = createHttpApp({ logger: pino({ level: 'silent' }, new Writable({ write: (_c, _e, cb) => cb() })) });
    // The master's isolation guard, as index.ts installs it before any route.
    guardOwnedRoutes(h.app, masterOwnedRoutes({ sandbox: async () => undefined, snapshot: async () => undefined, template: (ref) => h.module.ownerOf!(ref), job: (id) => h.module.ownerOfJob!(id) }));
    h.nodes = new NodeRegistry(h.db.kysely);
    h.coordination = o.coordination ?? new MemoryCoordination();
    const limits = o.maxConcurrentBuilds;
    const teamBuilds = limits && new TeamBuilds({ db: h.db.kysely, coordination: h.coordination, quotas: { limits: async (team) => ({ ...NO_LIMITS, maxConcurrentBuilds: limits[team] ?? 0 }) } });
    h.module = await startTemplates(h.cfg, {
      app: h.app, db: h.db, nodes: h.nodes, coordination: h.coordination, logger: silentLogger(), ...(teamBuilds ? { teamBuilds } : {}), vault: new Vault(newVaultKeyFile()),
      artifactGraceMs: o.graceMs ?? 3600_000, ...(o.builder ? { builderStatus: lateBuilderStatus(() => h.builds) } : {}),
    });
    if (o.builder) {
      h.builderFakes = fakes();
      h.builds = new BuildService({ repo: new BuildRepo(h.db.kysely), ...h.builderFakes.ports, templates: h.module.builder!, logger: silentLogger(), ...(teamBuilds ? { teamBuilds } : {}) });
      registerBuildRoutes(h.app, h.builds);
    }
    await h.app.listen({ host: '127.0.0.1', port });
    return h;
  }

  get kysely(): Kysely<Database> { return this.db.kysely; }

  async addNode(nodeId: string): Promise<FakeArtifactNode> {
    const n = await new FakeArtifactNode(nodeId, this.tc.log).start();
    this.fakeNodes.push(n);
    await this.nodes.register({
      nodeId, address: n.url, runtime: 'gvisor', pauseKinds: ['freeze'], capacity: { cpuCount: 2, memoryMB: 4096 },
      pausedResourceReleaseRatio: 0, version: 'test',
    });
    return n;
  }

  async call<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply<T>> {
    const res = await fetch(this.url + path, {
      method, redirect: 'manual',
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { /* not JSON */ }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  /** Creates a template through the route and answers the 202 body. */
  async create(body: Record<string, unknown>): Promise<{ template_id: string; job_id: string; status: string }> {
    const r = await this.call('POST', '/svc/template', body);
    if (r.status !== 202) throw new Error(`create answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** Runs the template center's side of a successful build: RUNNING phases, then BUILT. */
  async finishBuild(jobId: string, artifactId?: string): Promise<void> {
    const build = this.tc.builds.find((b) => b.jobId === jobId);
    if (!build) throw new Error(`no build request for job ${jobId}`);
    for (const phase of ['PULLING', 'BUILDING', 'UPLOADING'] as const) {
      const s = await this.tc.callback(this.url, jobId, { status: 'RUNNING', phase });
      if (s !== 204) throw new Error(`RUNNING ${phase} callback answered ${s}`);
    }
    const artifact = this.tc.storeArtifact(artifactId ?? build.artifactId);
    const s = await this.tc.callback(this.url, jobId, { status: 'BUILT', artifact, imageInfo: { layers: 2, sizeBytes: 1234, os: 'linux', architecture: 'amd64' } });
    if (s !== 204) throw new Error(`BUILT callback answered ${s}`);
    await this.module.settled();
  }

  async rows<T extends keyof Database>(table: T): Promise<Database[T][]> {
    return this.kysely.selectFrom(table).selectAll().execute() as Promise<Database[T][]>;
  }

  async close(): Promise<void> {
    await this.builds?.settled();
    await this.module.close();
    await this.app.close();
    for (const n of this.fakeNodes) await n.close();
    if (this.ownsTc) await this.tc.close();
    await this.db.close();
  }
}

