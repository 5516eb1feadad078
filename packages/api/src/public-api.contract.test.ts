import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfig, MemoryCoordination, notFound, silentLogger } from '@svc/common';
import { publicApiContract } from '@svc/contracts/public-api.contract';
import { startMaster } from '@svc/master';
import { FakeNodeAgent } from '@svc/master/testing/fake-node-agent';
import { startApiGateway } from './index.ts';

const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

publicApiContract('the gateway over the master', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-public-'));
  const cfg = defaultConfig(dir);
  cfg.master.database = { driver: 'sqlite', path: join(dir, 'm.sqlite') };
  cfg.master.listen = '127.0.0.1:0';
  cfg.api.listen = '127.0.0.1:0';
  cfg.api.api_key = KEY;
  cfg.sandbox_domain = 'localhost:3002';
  // The node is a fake: FakeNodeAgent passes the node agent's contract suite (contracts/node-agent.contract.ts).
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
  const gw = await startApiGateway(cfg, { logger: silentLogger(), masterUrl: master.url });
  return {
    url: gw.url, apiKey: KEY, template: 'base',
    async close() {
      await gw.close();
      await master.close();
      await node.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
