import { publicApiContract } from '@svc/contracts/public-api.contract';
import { startMasterOverFakeNode } from '@svc/master/testing/master-over-fake-node';
import { silentLogger } from '@svc/common';
import { startApiGateway } from './index.ts';

const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

publicApiContract('the gateway over the master', async () => {
  const m = await startMasterOverFakeNode((cfg) => { cfg.api.api_key = KEY; cfg.sandbox_domain = 'localhost:3002'; });
  const gw = await startApiGateway(m.cfg, { logger: silentLogger(), masterUrl: m.master.url });
  return {
    url: gw.url, apiKey: KEY, template: 'base',
    async close() {
      await gw.close();
      await m.close();
    },
  };
});
