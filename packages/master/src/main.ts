/** Runs the master alone: `node --import tsx packages/master/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { startMaster } from './index.ts';

await runComponent('master', ({ cfg, logger, coordination }) => startMaster(cfg, { logger, coordination: coordination() }));
