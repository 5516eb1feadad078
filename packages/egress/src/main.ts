/** Runs the egress proxy alone, beside its host's node agent: `node --import tsx packages/egress/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { startEgressFromConfig } from './from-config.ts';

await runComponent('egress', ({ cfg, logger }) => {
  if (!cfg.node_agent.node_id) throw new Error('node_agent.node_id must name the node whose sandboxes this egress proxy serves');
  return startEgressFromConfig(cfg, { logger, nodeId: cfg.node_agent.node_id });
});
