/**
 * Runs the template center alone: `node --import tsx packages/template-center/src/main.ts`.
 * Configuration: the shared config file and SVC_* variables (template_center section,
 * SVC_MASTER_ADDR for callbacks); SVC_TEMPLATE_CENTER_CA_CERT names the egress CA PEM;
 * SVC_TEMPLATE_CENTER_S3_* selects an S3-compatible store (see store/s3-env.ts);
 * SVC_TEMPLATE_CENTER_BLOB_CACHE_{DIR,MB} place and bound the layer blob cache (blobs/blob-cache-env.ts).
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
