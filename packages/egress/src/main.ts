/** Runs the egress proxy alone, beside its host's node agent: `node --import tsx packages/egress/src/main.ts [--config FILE]`. */
import { runComponent } from '@svc/common';
import { startEgressComponent } from './component.ts';

await runComponent('egress', startEgressComponent);
