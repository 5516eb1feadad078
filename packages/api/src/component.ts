import type { ComponentStart } from '@svc/common';
import { startApiGateway } from './index.ts';

/** The API gateway on its own (`svc api --config FILE`). */
export const startApiComponent: ComponentStart = ({ cfg, logger }) => startApiGateway(cfg, { logger });
