import type { ComponentStart } from '@svc/common';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startLifecycle, type RunningLifecycle } from './lifecycle.ts';

/** Lifecycle replicas on their own (`svc lifecycle --config FILE [--replica N]`): all of lifecycle.replicas, or the one --replica names. */
export const startLifecycleComponent: ComponentStart = async ({ cfg, logger, coordination, args }) => {
  const flag = args.indexOf('--replica');
  const indexes = flag >= 0 ? [Number(args[flag + 1])] : Array.from({ length: cfg.lifecycle.replicas }, (_, i) => i);
  if (indexes.some((i) => !Number.isInteger(i) || i < 0)) throw new Error('--replica needs a replica index (0, 1, ...)');
  const master = new MasterInternalClient(cfg.master.addr, { clusterToken: cfg.cluster_token });
  const replicas: RunningLifecycle[] = [];
  for (const replicaIndex of indexes) replicas.push(await startLifecycle(cfg, { logger, master, coordination: coordination(), replicaIndex }));
  return replicas;
};
