import { internalScheme, sameProgramEntry, workerCount, type ComponentStart } from '@svc/common';
import { lifecycleReplicaUrls } from '@svc/contracts/lifecycle';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startProxy } from './proxy.ts';

/**
 * The data-plane proxy on its own (`svc proxy --config FILE`): its data path runs in
 * `proxy.workers` processes of this same program, whose main runs the proxy worker when
 * SVC_WORKER_ROLE says so (docs/data-plane.md, "Worker processes").
 */
export const startProxyComponent: ComponentStart = ({ cfg, logger, coordination }) => startProxy(cfg, {
  logger,
  master: new MasterInternalClient(cfg.master.addr, { clusterToken: cfg.cluster_token }),
  lifecycleUrls: lifecycleReplicaUrls(cfg.lifecycle, internalScheme(cfg)),
  clusterToken: cfg.cluster_token,
  coordination: coordination(),
  workers: { count: workerCount(cfg.proxy.workers), entry: sameProgramEntry() },
});
