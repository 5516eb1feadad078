/** Runs the data-plane proxy alone: `node --import tsx packages/proxy/src/main.ts` (config: SVC_CONFIG / SVC_* env). */
import { createLogger, loadConfig } from '@svc/common';
import { coordinationFor } from '@svc/common/redis-coordination';
import { lifecycleReplicaUrls } from '@svc/contracts/lifecycle';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startProxy } from './proxy.ts';

const cfg = loadConfig();
const logger = createLogger('proxy');
const coordination = coordinationFor(cfg.redis);
const proxy = await startProxy(cfg, {
  logger,
  master: new MasterInternalClient(cfg.master.addr),
  lifecycleUrls: lifecycleReplicaUrls(cfg.lifecycle),
  coordination,
});

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal: sig }, 'data-plane proxy stopping');
    void proxy.close().then(() => coordination.close()).finally(() => process.exit(0));
  });
}
