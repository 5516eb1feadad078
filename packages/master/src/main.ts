/** Runs the master alone: `node --import tsx packages/master/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { startMasterComponent } from './component.ts';

await runComponent('master', startMasterComponent);
