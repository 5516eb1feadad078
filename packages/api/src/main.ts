/** Runs the public API gateway alone: `node --import tsx packages/api/src/main.ts [--config FILE]` (it reaches the master at `master.addr`). */
import { runComponent } from '@svc/common';
import { startApiGateway } from './index.ts';

await runComponent('api', ({ cfg, logger }) => startApiGateway(cfg, { logger }));
