/** Runs the public API gateway alone: `node --import tsx packages/api/src/main.ts [--config FILE]` (it reaches the master at `master.addr`). */
import { runComponent } from '@svc/common';
import { startApiComponent } from './component.ts';

await runComponent('api', startApiComponent);
