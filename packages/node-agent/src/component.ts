import type { ComponentStart } from '@svc/common';
import { startNodeAgent } from './index.ts';

/** The node agent on its own (`svc node-agent --config FILE`). Stopping it leaves its sandboxes running; the next start adopts them. */
export const startNodeAgentComponent: ComponentStart = ({ cfg, logger }) => startNodeAgent(cfg, { logger });
