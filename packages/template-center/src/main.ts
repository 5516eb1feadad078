/**
 * Runs the template center alone: `node --import tsx packages/template-center/src/main.ts [--config FILE]`.
 * It reads the `template_center` section (its store, blob cache and egress CA among it) and
 * calls the master back at `master.addr` (docs/configuration.md).
 */
import { runComponent } from '@svc/common';
import { startTemplateCenterComponent } from './component.ts';

await runComponent('template-center', startTemplateCenterComponent);
