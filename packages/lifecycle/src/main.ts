/**
 * Runs lifecycle replicas alone: `node --import tsx packages/lifecycle/src/main.ts [--replica N]`
 * starts replica N (default: all `lifecycle.replicas` of them in this process).
 */
import { createLogger, loadConfig } from '@svc/common';
import { coordinationFor } from '@svc/common/redis-coordination';
import { MasterInternalClient } from '@svc/contracts/master-internal';
import { startLifecycle, type RunningLifecycle } from './lifecycle.ts';

const cfg = loadConfig();
const logger = createLogger('lifecycle');
const coordination = coordinationFor(cfg.redis);
const master = new MasterInternalClient(cfg.master.addr);

const flag = process.argv.indexOf('--replica');
const indexes = flag >= 0 ? [Number(process.argv[flag + 1])] : Array.from({ length: cfg.lifecycle.replicas }, (_, i) => i);
if (indexes.some((i) => !Number.isInteger(i) || i < 0)) {
  process.stderr.write('--replica needs a replica index (0, 1, ...)\n');
  process.exit(2);
}

const replicas: RunningLifecycle[] = [];
for (const replicaIndex of indexes) {
  replicas.push(await startLifecycle(cfg, { logger, master, coordination, replicaIndex }));
}

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    void Promise.all(replicas.map((r) => r.close())).then(() => coordination.close()).finally(() => process.exit(0));
  });
}
