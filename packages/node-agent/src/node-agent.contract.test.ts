import { nodeAgentContract, nodeArtifactContract } from '@svc/contracts/node-agent.contract';
import { createRequest, startAgentUnderTest } from './testing/fixtures.ts';

nodeAgentContract('the node agent (runsc)', async () => {
  const t = await startAgentUnderTest('contract', '10.201.30.0/24');
  return { url: t.agent.url, createRequest: () => createRequest(t.env), close: () => t.close() };
});

nodeArtifactContract('the node agent', async () => {
  const t = await startAgentUnderTest('contract-art', '10.201.31.0/24');
  const { artifactId, ...ensure } = t.env.artifact;
  return { url: t.agent.url, artifact: { artifactId, ensure }, close: () => t.close() };
});
