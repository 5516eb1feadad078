import { randomBytes } from 'node:crypto';
import { nodeAgentContract } from '@svc/contracts/node-agent.contract';
import { FakeNodeAgent } from './fake-node-agent.ts';

nodeAgentContract('the master\'s FakeNodeAgent', async () => {
  const fake = await new FakeNodeAgent().start();
  return {
    url: fake.url,
    served: () => fake.served,
    createRequest: () => ({
      sandboxId: `sb${randomBytes(5).toString('hex')}`, templateId: 'tpl-test',
      artifact: { artifactId: 'art-1', sha256: 'a'.repeat(64), sizeBytes: 1, downloadUrl: 'http://127.0.0.1:1/x' },
      cpuCount: 1, memoryMB: 256, diskSizeMB: 512, envVars: {}, allowInternetAccess: true, network: { allowOut: [], denyOut: [] },
      metadata: {}, timeoutMs: 30_000,
    }),
    close: () => fake.close(),
  };
});
