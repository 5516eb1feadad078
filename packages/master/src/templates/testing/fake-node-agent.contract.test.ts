import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { nodeArtifactContract } from '@svc/contracts/node-agent.contract';
import { FakeArtifactNode } from './fake-node-agent.ts';

nodeArtifactContract('the template tests\' FakeArtifactNode', async () => {
  const bytes = Buffer.from('an ext4 image, as far as the fake can tell');
  const files = createServer((req, res) => (req.url === '/a.ext4' ? res.end(bytes) : res.writeHead(404).end()));
  await new Promise<void>((r) => files.listen(0, '127.0.0.1', r));
  const node = await new FakeArtifactNode('n1').start();
  return {
    url: node.url,
    served: () => node.served,
    artifact: {
      artifactId: 'art-contract',
      ensure: { sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, downloadUrl: `http://127.0.0.1:${(files.address() as AddressInfo).port}/a.ext4` },
    },
    async close() {
      await node.close();
      files.closeAllConnections();
      await new Promise((r) => files.close(r));
    },
  };
});
