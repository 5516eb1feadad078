/** A proxy worker from the sources (the entry the unit tests fork; `svc` forks itself instead). */
import { runWorker } from '@svc/common';
import { startProxyWorker } from './worker.ts';

runWorker(startProxyWorker);
