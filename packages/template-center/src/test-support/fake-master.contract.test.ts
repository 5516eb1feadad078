import { templateCallbackContract } from '@svc/contracts/template-callback.contract';
import { startFakeMaster } from './fake-master.ts';

templateCallbackContract('the template center\'s FakeMaster', async () => {
  const master = await startFakeMaster('cb-token');
  return {
    url: master.url,
    token: 'cb-token',
    awaitedJob: async () => {
      master.expect('job-contract');
      return 'job-contract';
    },
    close: () => master.close(),
  };
});
