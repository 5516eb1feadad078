import { internalScheme, type ComponentStart } from '@svc/common';
import { lifecycleReplicaUrls } from '@svc/contracts/lifecycle';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startProxy } from './proxy.ts';

/** The data-plane proxy on its own (`svc proxy --config FILE`). */
export const startProxyComponent: ComponentStart = ({ cfg, logger, coordination }) => startProxy(cfg, {
  logger,
  master: new MasterInternalClient(cfg.master.addr),
  lifecycleUrls: lifecycleReplicaUrls(cfg.lifecycle, internalScheme(cfg)),
  coordination: coordination(),
});
