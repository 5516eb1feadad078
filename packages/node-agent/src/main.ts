/**
 * Runs the node agent alone: `node --import tsx packages/node-agent/src/main.ts [--config FILE]`.
 * Stopping it leaves its sandboxes running; the next start adopts them.
 */
import { runComponent } from '@svc/common';
import { startNodeAgentComponent } from './component.ts';

await runComponent('node-agent', startNodeAgentComponent);
