import { templateCallbackContract } from '@svc/contracts/template-callback.contract';
import { Harness } from './testing/harness.ts';

templateCallbackContract('the master', async () => {
  const h = await Harness.start({ database: { driver: 'sqlite', path: ':memory:' }, token: 'cb-token' });
  return {
    url: h.url,
    token: 'cb-token',
    awaitedJob: async () => (await h.create({ image: 'registry.example/library/node:22' })).job_id,
    close: () => h.close(),
  };
});
