import { sameProgramEntry, type ComponentStart } from '@svc/common';
import { startEgressFromConfig } from './from-config.ts';

/**
 * A node's egress proxy on its own (`svc egress --config FILE`), for the node that
 * node_agent.node_id names; its data path runs in `egress.workers` processes of this same
 * program, whose main runs the egress worker when SVC_WORKER_ROLE says so.
 */
export const startEgressComponent: ComponentStart = async ({ cfg, logger }) => {
  if (!cfg.node_agent.node_id) throw new Error('node_agent.node_id must name the node whose sandboxes this egress proxy serves');
  return startEgressFromConfig(cfg, { logger, nodeId: cfg.node_agent.node_id, workerEntry: sameProgramEntry() });
};
