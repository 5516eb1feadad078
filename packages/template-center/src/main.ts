/**
 * Runs the template center alone: `node --import tsx packages/template-center/src/main.ts`.
 * Configuration: the shared config file and SVC_* variables (template_center section,
 * SVC_MASTER_ADDR for callbacks); SVC_TEMPLATE_CENTER_CA_CERT names the egress CA PEM;
 * `template_center.s3` (SVC_TEMPLATE_CENTER_S3_*) selects an S3-compatible store (store/s3-env.ts);
 * `template_center.blob_cache` (SVC_TEMPLATE_CENTER_BLOB_CACHE_{DIR,MB}) places and bounds the layer blob cache.
 */
import { createLogger, loadConfig } from '@svc/common';
import { coordinationFor } from '@svc/common/redis-coordination';
import { startTemplateCenter } from './template-center.ts';

const cfg = loadConfig();
const logger = createLogger('template-center');
const coordination = coordinationFor(cfg.redis);
const tc = await startTemplateCenter(cfg, {
  logger,
  coordination,
  masterAddr: cfg.master.addr,
  caCertPath: process.env.SVC_TEMPLATE_CENTER_CA_CERT || undefined,
});

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal: sig }, 'stopping');
    void tc.close().then(() => coordination.close()).finally(() => process.exit(0));
  });
}
