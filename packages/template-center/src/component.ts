import type { ComponentStart } from '@svc/common';
import { startTemplateCenter } from './template-center.ts';

/** The template center on its own (`svc template-center --config FILE`). */
export const startTemplateCenterComponent: ComponentStart = ({ cfg, logger, coordination }) => startTemplateCenter(cfg, { logger, coordination: coordination(), masterAddr: cfg.master.addr });
