/**
 * The worker side of a WorkerPool (worker-pool.ts): waits for its start message, starts the
 * role, reports ready, then answers the primary's calls one at a time, in order. Calls that
 * arrive while it starts wait for it.
 */
import pino from 'pino';
import { REDACTED_PATHS, type Logger } from './log.ts';
import { METRICS_CALL, metricsAsJson } from './metrics.ts';
import type { PrimaryMessage, WorkerMessage } from './worker-pool.ts';

export interface StartedWorker {
  /** What the primary learns at ready (its listeners' ports). */
  info: unknown;
  /** One call of the primary (a change to apply, a question); the answer goes back to it. */
  handle(body: unknown): Promise<unknown>;
  close(): Promise<void>;
}

/** Starts a role from the primary's start message; `emit` sends the primary an event. */
export type WorkerStart = (init: unknown, emit: (body: unknown) => void) => Promise<StartedWorker>;

/**
 * A worker's logger, as its primary logs: into SVC_WORKER_LOG_FILE (info and up) and warnings on
 * stderr, which the worker shares with its primary; without the file, everything on stderr.
 */
export function workerLogger(component: string): Logger {
  const level = process.env.SVC_LOG_LEVEL ?? 'info';
  const base = { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, base: { component, pid: process.pid } };
  const file = process.env.SVC_WORKER_LOG_FILE;
  if (!file) return pino(base, pino.destination({ fd: 2, sync: false }));
  return pino(base, pino.multistream([
    { level: 'info', stream: pino.destination({ dest: file, append: true, sync: false }) },
    { level: 'warn', stream: pino.destination({ fd: 2, sync: false }) },
  ]));
}

export function runWorker(start: WorkerStart): void {
  const send = (m: WorkerMessage) => { if (process.connected) process.send!(m); };
  // Calls wait for the start; the primary may send one before the start message is handled.
  let begin!: (init: unknown) => void;
  let chain: Promise<StartedWorker | undefined> = new Promise<unknown>((resolve) => { begin = resolve; }).then((init) => start(init, (body) => send({ svc: 'event', body })).then((w) => {
    send({ svc: 'ready', info: w.info });
    process.once('SIGTERM', () => { void w.close().finally(() => process.exit(0)); });
    return w;
  }, (err: Error) => {
    send({ svc: 'failed', error: err.message });
    // Let the message go out before the process ends.
    setTimeout(() => process.exit(1), 100);
    return undefined;
  }));
  process.on('message', (msg: PrimaryMessage) => {
    if (!msg || typeof msg !== 'object' || !('svc' in msg)) return; // another library's message
    if (msg.svc === 'init') { begin(msg.data); return; }
    if (msg.svc !== 'call') return;
    // In order, after the start and every earlier call.
    chain = chain.then(async (w) => {
      if (!w) return w;
      try {
        const isMetrics = (msg.body as { kind?: unknown } | undefined)?.kind === METRICS_CALL.kind;
        send({ svc: 'reply', id: msg.id, body: isMetrics ? await metricsAsJson() : await w.handle(msg.body) });
      } catch (err) {
        send({ svc: 'reply', id: msg.id, error: (err as Error).message });
      }
      return w;
    });
  });
  // The primary gone is the end of this worker: nothing else would stop it.
  process.on('disconnect', () => process.exit(0));
  send({ svc: 'hello' });
}
