/**
 * Runs the data-plane proxy alone: `node --import tsx packages/proxy/src/main.ts [--config FILE]`.
 * Its worker processes are this file again (component.ts forks the same program), with SVC_WORKER_ROLE set.
 */
import { runComponent, runWorker } from '@svc/common';
import { PROXY_WORKER_ROLE } from './worker-protocol.ts';

if (process.env.SVC_WORKER_ROLE === PROXY_WORKER_ROLE) {
  runWorker((await import('./worker.ts')).startProxyWorker);
} else {
  await runComponent('proxy', (await import('./component.ts')).startProxyComponent);
}
