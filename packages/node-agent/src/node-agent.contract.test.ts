import { nodeAgentContract } from '@svc/contracts/node-agent.contract';
import { createRequest, startAgentUnderTest } from './testing/fixtures.ts';

nodeAgentContract('the node agent (runsc)', async () => {
  const t = await startAgentUnderTest('contract', '10.201.30.0/24');
  return { url: t.agent.url, createRequest: () => createRequest(t.env), close: () => t.close() };
});
