import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, notFound, silentLogger } from '@svc/common';
import { MasterClient } from '@svc/contracts/master';
import { masterInternalContract } from '@svc/contracts/master-internal.contract';
import { startMaster } from './index.ts';
import { FakeNodeAgent } from './testing/fake-node-agent.ts';

const IDLE_TIMEOUT_SEC = 1;

masterInternalContract('the master', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-internal-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  const node = await new FakeNodeAgent().start();
  const master = await startMaster(cfg, {
    logger: silentLogger(), coordination: new MemoryCoordination(),
    templates: async () => ({
      resolver: {
        async resolveForCreate(ref: string) {
          if (ref !== 'base') throw notFound(`template ${ref} not found`, 130404);
          return { templateId: 'tpl-base', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024,
            artifact: { artifactId: 'a', sha256: 's', sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/' } };
        },
        async idsFor(ref: string) { return ref === 'base' ? ['tpl-base'] : [ref]; },
      },
      onNodeRegistered() {}, async close() {},
    }),
  });
  await master.nodes.register({ nodeId: 'n1', address: node.url, runtime: 'gvisor', pauseKinds: ['freeze'], capacity: { cpuCount: 2, memoryMB: 8192 }, pausedResourceReleaseRatio: 0, version: 't' });
  const api = new MasterClient(master.url);
  const createdAt = new Map<string, number>();
  return {
    url: master.url,
    async addRunning({ autoResume, onTimeout }) {
      const s = await api.createSandbox({
        template: 'base', timeout: IDLE_TIMEOUT_SEC, onTimeout, autoResume, metadata: {}, envVars: {}, secure: true,
        network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
      });
      createdAt.set(s.sandboxId, Date.now());
      return { sandboxId: s.sandboxId, envdAccessToken: s.envdAccessToken! };
    },
    async makeDue(sandboxId) {
      const wait = createdAt.get(sandboxId)! + IDLE_TIMEOUT_SEC * 1000 + 100 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    },
    async close() {
      await master.close();
      await node.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
