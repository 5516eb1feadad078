/**
 * What the master's sandbox service tests share: a service over a real database and a fake node
 * agent, a create input, and the error an operation failed with.
 */
import assert from 'node:assert/strict';
import { defaultConfig, ErrorCodes, MemoryCoordination, notFound, silentLogger, type SvcError } from '@svc/common';
import { SANDBOX_EVENTS_TOPIC, type SandboxEvent } from '@svc/contracts/lifecycle';
import type { CreateSandboxInput } from '@svc/contracts/master';
import { openDatabase } from '../db/connect.ts';
import { migrate } from '../db/migrator.ts';
import { migrations } from '../migrations/index.ts';
import { NodeRegistry } from '../nodes/registry.ts';
import { FakeNodeAgent } from '../testing/fake-node-agent.ts';
import { NodeEgressPolicies } from '../egress-policies.ts';
import type { MasterSandboxesDeps } from './context.ts';
import type { TemplateResolver } from './ports.ts';
import { SandboxRepo } from './repo.ts';
import { MasterSandboxes } from './service.ts';

export const templates: TemplateResolver = {
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

export function input(over: Partial<CreateSandboxInput> = {}): CreateSandboxInput {
  return {
    template: 'base', onTimeout: 'kill', autoResume: false, metadata: {}, envVars: {}, secure: false,
    network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [], ...over,
  };
}

export async function status(p: Promise<unknown>): Promise<{ status: number; code: number; message: string; headers: Record<string, string> }> {
  try {
    await p;
  } catch (e) {
    const x = e as SvcError;
    return { status: x.status, code: x.code, message: x.message, headers: x.headers };
  }
  throw new Error('expected an error');
}

export async function setup(dbCfg: Parameters<typeof openDatabase>[0], over: Partial<MasterSandboxesDeps> = {}) {
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
    proxies: { purge: async (ids) => { purged.push(ids); } }, egress: new NodeEgressPolicies(nodes, '', silentLogger()), deleteTimeoutMs: 300, ...over,
  });
  return { db, node, nodes, svc, events, coordination, cfg, purged, async close() { await node.close(); await db.close(); } };
}

export const flush = () => new Promise((r) => setImmediate(r));

export async function waitUntil(cond: () => boolean, ms = 3_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
