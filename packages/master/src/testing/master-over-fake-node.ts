/**
 * A real master (SQLite in a temporary directory) over the fake node agent, with one template,
 * `base`, resolved without a build: what the gateway's, the SDK's and the contract tests stand on.
 * FakeNodeAgent passes the node agent's contract suite (contracts/node-agent.contract.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, notFound, silentLogger, type SvcConfig } from '@svc/common';
import { startMaster, type Master } from '../index.ts';
import { FakeNodeAgent } from './fake-node-agent.ts';

export interface MasterOverFakeNode {
  /** The config the master started with; the caller's edits before start are in it. */
  cfg: SvcConfig;
  master: Master;
  node: FakeNodeAgent;
  close(): Promise<void>;
}

export async function startMasterOverFakeNode(configure: (cfg: SvcConfig) => void = () => {}): Promise<MasterOverFakeNode> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-master-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  cfg.api.listen = '127.0.0.1:0';
  configure(cfg);
  const node = await new FakeNodeAgent().start();
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination: new MemoryCoordination(),
    templates: async () => ({
      resolver: {
        async resolveForCreate(ref: string) {
          if (ref !== 'base') throw notFound(`template ${ref} not found`, 130404);
          return {
            templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024,
            artifact: { artifactId: 'a', sha256: 's', sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/' },
          };
        },
        async idsFor(ref: string) { return ref === 'base' ? ['tpl-base'] : [ref]; },
        async artifactRef(artifactId: string) { return { artifactId, sha256: 's', sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/' }; },
      },
      onNodeRegistered() {},
      async close() {},
    }),
  });
  await master.nodes.register({
    nodeId: 'n1', address: node.url, runtime: 'gvisor', pauseKinds: ['freeze'],
    capacity: { cpuCount: 8, memoryMB: 16384 }, pausedResourceReleaseRatio: 0, version: 't',
  });
  return {
    cfg, master, node,
    async close() {
      await master.close();
      await node.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
