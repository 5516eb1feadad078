import { publicApiContract } from '@svc/contracts/public-api.contract';
import { startFakeApi } from './fake-api.ts';

publicApiContract('our SDK\'s fake gateway', async () => {
  const fake = await startFakeApi({ apiKey: 'e2b_0123456789abcdef0123456789abcdef01234567', domain: 'localhost:3002' });
  return { url: fake.url, apiKey: 'e2b_0123456789abcdef0123456789abcdef01234567', template: 'base', close: () => fake.close() };
});
