/** A worker process's entry from the sources (unit tests fork it under tsx); svc itself forks its own program, whose main does the same. */
import { runWorker } from '@svc/common';
import { startEgressWorker } from './worker.ts';

runWorker(startEgressWorker);
