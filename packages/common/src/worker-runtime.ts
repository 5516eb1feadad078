/**
 * The worker side of a WorkerPool (worker-pool.ts): waits for its start message, starts the
 * role, reports ready, then answers the primary's calls one at a time, in order. Calls that
 * arrive while it starts wait for it.
 */
import { openSync } from 'node:fs';
import type { AddressInfo, Server } from 'node:net';
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
  // Opened now, not by the destination in the background: a worker that gives up root once it
  // listens (run-as.ts) could not open a file of root's afterwards.
  const fd = openSync(file, 'a');
  return pino(base, pino.multistream([
    { level: 'info', stream: pino.destination({ fd, sync: false }) },
    { level: 'warn', stream: pino.destination({ fd: 2, sync: false }) },
  ]));
}

/** Set by runWorker: listeners then come from the pool's primary. */
let inPool = false;
let nextListen = 1;
const listenAsks = new Map<number, { resolve(handle: unknown): void; reject(err: Error): void }>();
/** How many listeners this worker asked for per address: the n-th port-0 listener of every worker is one socket. */
const listenCounts = new Map<string, number>();

/**
 * Listens on `host:port` as `server.listen` does; in a pool's worker, on the socket the primary
 * binds and keeps for the pool's life (listen-handles.ts), so that the port stays open while a
 * worker is replaced. Rejects with an error whose `code` is the bind's (EADDRINUSE, say).
 */
export async function listenShared(server: Server, port: number, host: string): Promise<AddressInfo> {
  const target: unknown = inPool ? await askListener(host, port) : undefined;
  // A listen that fails closes the server's handle (node's net does): nothing is left open here.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const done = () => { server.off('error', reject); resolve(); };
    if (target === undefined) server.listen(port, host, done);
    else server.listen(target as never, done);
  });
  return server.address() as AddressInfo;
}

/** Closes this process's copy of a socket the primary sent (the primary keeps its own). */
function closeHandle(handle: unknown): void {
  (handle as { close?: () => void } | undefined)?.close?.();
}

function askListener(host: string, port: number): Promise<unknown> {
  const id = nextListen++;
  const key = `${host}|${port}`;
  const index = listenCounts.get(key) ?? 0;
  listenCounts.set(key, index + 1);
  return new Promise((resolve, reject) => {
    listenAsks.set(id, { resolve, reject });
    process.send!({ svc: 'listen', id, host, port, index } satisfies WorkerMessage);
  });
}

export function runWorker(start: WorkerStart): void {
  inPool = true;
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
  process.on('message', (msg: PrimaryMessage, handle: unknown) => {
    if (!msg || typeof msg !== 'object' || !('svc' in msg)) return; // another library's message
    if (msg.svc === 'init') { begin(msg.data); return; }
    if (msg.svc === 'listening') {
      const ask = listenAsks.get(msg.id);
      listenAsks.delete(msg.id);
      if (!ask) closeHandle(handle); // nobody waits for it: this process's copy of the socket goes
      else if (msg.error !== undefined) ask.reject(Object.assign(new Error(msg.error), { code: msg.code }));
      else ask.resolve(handle);
      return;
    }
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
