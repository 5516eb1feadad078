/**
 * Runs lifecycle replicas alone: `node --import tsx packages/lifecycle/src/main.ts [--config FILE] [--replica N]`
 * starts replica N (default: all `lifecycle.replicas` of them in this process).
 */
import { runComponent } from '@svc/common';
import { startLifecycleComponent } from './component.ts';

await runComponent('lifecycle', startLifecycleComponent);
