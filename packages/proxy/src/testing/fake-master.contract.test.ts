import { randomBytes } from 'node:crypto';
import { masterInternalContract } from '@svc/contracts/master-internal.contract';
import { FakeMaster } from './fake-master.ts';

masterInternalContract('the proxy\'s FakeMaster', async () => {
  const fake = new FakeMaster({ clusterToken: 'the-cluster-token' });
  const url = await fake.start();
  return {
    url, clusterToken: 'the-cluster-token',
    async addRunning({ autoResume, onTimeout }) {
      const sandboxId = `sbx-${randomBytes(6).toString('hex')}`;
      const envdAccessToken = randomBytes(16).toString('hex');
      fake.add({ sandboxId, autoResume, onTimeout, envdAccessToken });
      return { sandboxId, envdAccessToken };
    },
    async makeDue(sandboxId) { fake.set(sandboxId, { due: true }); },
    close: () => fake.close(),
  };
});
