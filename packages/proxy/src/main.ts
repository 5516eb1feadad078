/** Runs the data-plane proxy alone: `node --import tsx packages/proxy/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { lifecycleReplicaUrls } from '@svc/contracts/lifecycle';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startProxy } from './proxy.ts';

await runComponent('proxy', ({ cfg, logger, coordination }) => startProxy(cfg, {
  logger,
  master: new MasterInternalClient(cfg.master.addr),
  lifecycleUrls: lifecycleReplicaUrls(cfg.lifecycle),
  coordination: coordination(),
}));
