/**
 * Runs the template center alone: `node --import tsx packages/template-center/src/main.ts [--config FILE]`.
 * It reads the `template_center` section (its store, blob cache and egress CA among it) and
 * calls the master back at `master.addr` (docs/configuration.md).
 */
import { runComponent } from '@svc/common';
import { startTemplateCenter } from './template-center.ts';

await runComponent('template-center', ({ cfg, logger, coordination }) => startTemplateCenter(cfg, { logger, coordination: coordination(), masterAddr: cfg.master.addr }));
