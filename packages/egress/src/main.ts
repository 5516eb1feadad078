/**
 * Runs the egress proxy alone, beside its host's node agent: `node --import tsx packages/egress/src/main.ts [--config FILE]`.
 * Its worker processes are this file again (component.ts forks the same program), with SVC_WORKER_ROLE set.
 */
import { runComponent, runWorker } from '@svc/common';
import { EGRESS_WORKER_ROLE } from './worker-protocol.ts';

if (process.env.SVC_WORKER_ROLE === EGRESS_WORKER_ROLE) {
  runWorker((await import('./worker.ts')).startEgressWorker);
} else {
  await runComponent('egress', (await import('./component.ts')).startEgressComponent);
}
