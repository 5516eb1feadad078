/** Runs the data-plane proxy alone: `node --import tsx packages/proxy/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { startProxyComponent } from './component.ts';

await runComponent('proxy', startProxyComponent);
