import type { ComponentStart } from '@svc/common';
import { startMaster } from './index.ts';

/** The master on its own (`svc master --config FILE`). */
export const startMasterComponent: ComponentStart = ({ cfg, logger, coordination }) => startMaster(cfg, { logger, coordination: coordination() });
