import { MasterClient } from '@svc/contracts/master';
import { clusterHeaders } from '@svc/contracts/cluster-token';
import { masterInternalContract } from '@svc/contracts/master-internal.contract';
import { startMasterOverFakeNode } from './testing/master-over-fake-node.ts';

const IDLE_TIMEOUT_SEC = 1;
const CLUSTER_TOKEN = 'the-master-cluster-token';

masterInternalContract('the master', async () => {
  const { master, close } = await startMasterOverFakeNode((cfg) => { cfg.cluster_token = CLUSTER_TOKEN; });
  const api = new MasterClient(master.url, { headers: clusterHeaders(CLUSTER_TOKEN) });
  const createdAt = new Map<string, number>();
  return {
    url: master.url, clusterToken: CLUSTER_TOKEN,
    async addRunning({ autoResume, onTimeout }) {
      const s = await api.createSandbox({
        template: 'base', timeout: IDLE_TIMEOUT_SEC, onTimeout, autoResume, metadata: {}, envVars: {}, secure: true,
        network: { allowOut: [], denyOut: [], allowPublicTraffic: true }, volumeMounts: [],
      });
      createdAt.set(s.sandboxId, Date.now());
      return { sandboxId: s.sandboxId, envdAccessToken: s.envdAccessToken! };
    },
    async makeDue(sandboxId) {
      const wait = createdAt.get(sandboxId)! + IDLE_TIMEOUT_SEC * 1000 + 100 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    },
    close,
  };
});
