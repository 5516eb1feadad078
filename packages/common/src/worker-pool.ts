/**
 * Worker processes behind one listener (docs/design.md, "Proxies on every core"): the data-plane
 * and egress proxies run their data path in N processes forked by node's cluster module, which
 * share each listening socket, which the primary binds and holds for the pool's life
 * (listen-handles.ts: every worker accepts from it, as nginx's workers do; the primary never
 * touches a connection). The primary keeps the state that must be exact (the
 * egress policies, the admin API) and pushes every change to every worker, acknowledged, before
 * it answers the change's caller. A worker that dies is forked again with the state as it is then.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism, setPriority } from 'node:os';
import type { Logger } from './log.ts';
import { ListenError, ListenHandles } from './listen-handles.ts';
import { addMetricsSource, collect, counter, gauge, METRICS_CALL } from './metrics.ts';
import { tracingServiceName } from './tracing.ts';

/** What a worker process runs: a script with arguments (the svc bundle with `__worker <role>`, or a source entry under tsx). */
export interface WorkerEntry {
  exec: string;
  args: string[];
  execArgv: string[];
}

export interface WorkerPoolOptions<I> {
  /** Names the kind of worker in logs and in SVC_WORKER_ROLE. */
  role: string;
  count: number;
  entry: WorkerEntry;
  /** The start message of a worker, taken when it is forked: a replacement starts from the state as it is then. */
  init: () => I;
  logger: Logger;
  /** What workers send on their own (audit records, say). */
  onEvent?: (body: unknown, workerId: number) => void;
  /**
   * A worker ended without being asked to (not at close), before its replacement is forked:
   * `ready` says whether it had begun to serve. Whatever it held and had not sent is lost.
   */
  onExit?: (exit: { pid: number; code: number | null; signal: string | null; ready: boolean }) => void;
  /**
   * The workers' nice value (os.setPriority); absent or 0: the primary's. Lowering it needs root
   * (CAP_SYS_NICE): without, the workers keep the primary's, and a warning says so once.
   */
  priority?: number;
  /**
   * How messages cross between the primary and a worker (node's IPC): 'json' (the default) or
   * 'advanced' (the structured clone), which copies a long string as it is where JSON escapes
   * every quote in it and parses it again.
   */
  serialization?: 'json' | 'advanced';
  /** How long a worker may take to acknowledge a call before it is killed and replaced; default 5 s. */
  callTimeoutMs?: number;
  /**
   * How long a worker may take to start; default 90 s. A worker loads the whole `svc` bundle: on
   * a 2-core CI host busy booting sandboxes, 30 s was once not enough and `svc up` gave up.
   */
  startTimeoutMs?: number;
  /** Variables added to each worker's environment (the primary's is inherited as it is). */
  env?: Record<string, string>;
}

const START_TIMEOUT_MS = 90_000;

/** Messages between the primary and a worker; `svc` keeps them apart from other libraries' IPC. */
export type PrimaryMessage =
  | { svc: 'init'; data: unknown }
  | { svc: 'call'; id: number; body: unknown }
  /** The answer to a worker's `listen`: the socket comes with it, or why it could not be bound. */
  | { svc: 'listening'; id: number; error?: string; code?: string };
export type WorkerMessage =
  | { svc: 'hello' }
  | { svc: 'ready'; info: unknown }
  | { svc: 'failed'; error: string }
  | { svc: 'reply'; id: number; body?: unknown; error?: string }
  | { svc: 'event'; body: unknown }
  /** The worker asks for the shared socket of a listener (worker-runtime.ts listenShared). */
  | { svc: 'listen'; id: number; host: string; port: number; index: number };

interface Member {
  worker: Worker;
  ready: boolean;
  /**
   * Resolved when the worker said hello (messages sent earlier would be lost while its program
   * loads) and was sent its start message; calls go after it and wait in the worker for the start.
   */
  started: Promise<void>;
  greet(): void;
  /** Resolved at its ready: a call's timeout runs from then, a start being bounded by its own. */
  whenReady: Promise<void>;
  markReady(): void;
  calls: Map<number, { resolve(v: unknown): void; reject(e: Error): void }>;
}

let schedulingSet = false;
let logFile: string | undefined;

/** Where workers forked from now on log (the primary's log file, `svc up`'s svc.log); absent: stderr. */
export function setWorkerLogFile(file: string | undefined): void {
  logFile = file;
}

export class WorkerPool<I> {
  private readonly members = new Map<number, Member>();
  private nextCall = 1;
  private closing = false;
  /** Consecutive workers that died before they were ready: the next fork waits longer. */
  private failedStarts = 0;
  private dropMetrics: (() => void) | undefined;
  private dropGauge: (() => void) | undefined;
  /** One metric for every pool of the process (by role); asked for here, so a worker process has none of it. */
  private readonly restarts = counter('svc_worker_restarts_total', 'Worker processes of a pool (the proxies\' data path) that died and were forked again', ['role']);
  private readonly listeners = new ListenHandles();
  /** What the first worker reported when it was ready (its listeners' ports). */
  info: unknown;

  private constructor(private readonly o: WorkerPoolOptions<I>) {}

  static async start<I>(o: WorkerPoolOptions<I>): Promise<WorkerPool<I>> {
    if (!cluster.isPrimary) throw new Error('a worker pool is started by a primary process only');
    if (!schedulingSet) {
      // Before the first fork: a listener a worker opens with a plain listen() (not listenShared)
      // is still accepted from by the workers themselves, never by the primary.
      cluster.schedulingPolicy = cluster.SCHED_NONE;
      schedulingSet = true;
    }
    const pool = new WorkerPool(o);
    // The workers' metrics (requests, latencies) are this process's too: /metrics sums them in.
    pool.dropMetrics = addMetricsSource(async () => (await pool.request(METRICS_CALL)) as never);
    pool.dropGauge = collect(
      gauge('svc_workers', 'Worker processes of a pool (the proxies\' data path) that are ready', ['role']),
      () => [{ labels: { role: o.role }, value: [...pool.members.values()].filter((m) => m.ready).length }],
      (err) => o.logger.warn({ role: o.role, err: err.message }, 'the workers gauge could not be read'),
    );
    try {
      // One first, so that the listeners' ports (0: ephemeral) are bound once and shared by the others.
      pool.info = await pool.fork();
      await Promise.all(Array.from({ length: Math.max(0, o.count - 1) }, () => pool.fork()));
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  get size(): number {
    return this.members.size;
  }

  pids(): number[] {
    return [...this.members.values()].map((m) => m.worker.process.pid ?? 0);
  }

  /**
   * Sends a call to every worker and resolves once each has acknowledged it, or died, or was
   * killed for not answering in time; a worker forked meanwhile starts from init(), which already
   * holds the change. Rejects only when a worker answers with an error.
   */
  async broadcast(body: unknown): Promise<void> {
    await Promise.all([...this.members.values()].map((m) => this.call(m, body).catch((err: Error) => {
      if ((err as { gone?: boolean }).gone) return;
      throw err;
    })));
  }

  /** Each live worker's answer to a call (a worker that died meanwhile is left out). */
  async request(body: unknown): Promise<unknown[]> {
    const answers = await Promise.all([...this.members.values()].map((m) => this.call(m, body).then((v) => ({ v }), (err: Error) => {
      if ((err as { gone?: boolean }).gone) return undefined;
      throw err;
    })));
    return answers.filter((a): a is { v: unknown } => a !== undefined).map((a) => a.v);
  }

  async close(): Promise<void> {
    this.closing = true;
    this.dropMetrics?.();
    this.dropGauge?.();
    await Promise.all([...this.members.values()].map((m) => new Promise<void>((resolve) => {
      if (m.worker.isDead()) { resolve(); return; }
      const timer = setTimeout(() => m.worker.process.kill('SIGKILL'), 10_000);
      m.worker.once('exit', () => { clearTimeout(timer); resolve(); });
      m.worker.process.kill('SIGTERM');
    })));
    await this.listeners.close();
  }

  private call(m: Member, body: unknown): Promise<unknown> {
    const id = this.nextCall++;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      m.calls.set(id, {
        resolve: (v) => { clearTimeout(timer); resolve(v); },
        reject: (e) => { clearTimeout(timer); reject(e); },
      });
      // Sent once the worker listens for it, and timed from its ready: a worker still starting is
      // bounded by the start timeout, not by this one.
      void m.started.then(() => {
        if (!m.calls.has(id) || !m.worker.isConnected()) return;
        m.worker.send({ svc: 'call', id, body } satisfies PrimaryMessage);
        return m.whenReady;
      }).then(() => {
        if (!m.calls.has(id)) return;
        const timeoutMs = this.o.callTimeoutMs ?? 5_000;
        timer = setTimeout(() => {
          m.calls.delete(id);
          this.o.logger.error({ role: this.o.role, pid: m.worker.process.pid, timeoutMs }, 'a worker did not acknowledge a change in time; it is replaced, and its replacement starts from the current state');
          m.worker.process.kill('SIGKILL');
          reject(Object.assign(new Error('worker replaced'), { gone: true }));
        }, timeoutMs);
      });
    });
  }

  private priorityRefused = false;

  private prioritize(pid: number | undefined): void {
    const priority = this.o.priority ?? 0;
    if (priority === 0 || pid === undefined) return;
    try {
      setPriority(pid, priority);
    } catch (err) {
      if (this.priorityRefused) return;
      this.priorityRefused = true;
      this.o.logger.warn({ role: this.o.role, priority, err: (err as Error).message }, 'the workers\' priority could not be set (it needs root); they run at the primary\'s');
    }
  }

  /** Answers a worker's `listen` with the pool's socket for that address, bound on the first ask. */
  private sendListener(worker: Worker, msg: { id: number; host: string; port: number; index: number }): void {
    const answer = (m: PrimaryMessage, handle?: unknown) => {
      if (!worker.isConnected()) return; // it died meanwhile; its replacement asks again
      worker.send(m, handle as never, (err: Error | null) => {
        if (err) this.o.logger.warn({ role: this.o.role, pid: worker.process.pid, err: err.message }, 'a listener could not be sent to a worker');
      });
    };
    this.listeners.get({ host: msg.host, port: msg.port, index: msg.index }).then(
      (handle) => answer({ svc: 'listening', id: msg.id }, handle),
      (err: Error) => answer({ svc: 'listening', id: msg.id, error: err.message, ...(err instanceof ListenError ? { code: err.code } : {}) }),
    );
  }

  /** Forks one worker and resolves with what it reported at ready. */
  private fork(): Promise<unknown> {
    cluster.setupPrimary({ exec: this.o.entry.exec, args: this.o.entry.args, execArgv: this.o.entry.execArgv, silent: false, serialization: this.o.serialization ?? 'json' });
    const service = tracingServiceName();
    const worker = cluster.fork({ ...this.o.env, SVC_WORKER_ROLE: this.o.role, ...(logFile ? { SVC_WORKER_LOG_FILE: logFile } : {}), ...(service ? { SVC_WORKER_SERVICE: service } : {}) });
    let greet!: () => void;
    const started = new Promise<void>((resolve) => { greet = resolve; });
    let markReady!: () => void;
    const whenReady = new Promise<void>((resolve) => { markReady = resolve; });
    this.prioritize(worker.process.pid);
    const member: Member = { worker, ready: false, started, greet, whenReady, markReady, calls: new Map() };
    this.members.set(worker.id, member);
    const ready = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => { worker.process.kill('SIGKILL'); reject(new Error(`${this.o.role} worker did not start within ${(this.o.startTimeoutMs ?? START_TIMEOUT_MS) / 1000} s`)); }, this.o.startTimeoutMs ?? START_TIMEOUT_MS);
      worker.on('message', (msg: WorkerMessage) => {
        if (!msg || typeof msg !== 'object' || !('svc' in msg)) return; // another library's message
        switch (msg.svc) {
          // Its listener is in place: a message sent before would be lost (the program loads first).
          case 'hello': worker.send({ svc: 'init', data: this.o.init() } satisfies PrimaryMessage); member.greet(); break;
          case 'ready': member.ready = true; member.markReady(); clearTimeout(timer); resolve(msg.info); break;
          case 'failed': clearTimeout(timer); reject(new Error(`${this.o.role} worker failed to start: ${msg.error}`)); break;
          case 'reply': {
            const c = member.calls.get(msg.id);
            member.calls.delete(msg.id);
            if (!c) break;
            if (msg.error !== undefined) c.reject(new Error(msg.error)); else c.resolve(msg.body);
            break;
          }
          case 'event': this.o.onEvent?.(msg.body, worker.id); break;
          case 'listen': this.sendListener(worker, msg); break;
        }
      });
      // A send to a worker that died but whose exit is not handled yet fails here (ERR_IPC_CHANNEL_CLOSED);
      // its 'exit' below settles its calls.
      worker.on('error', (err) => this.o.logger.warn({ role: this.o.role, pid: worker.process.pid, err: err.message }, 'a worker\'s channel failed'));
      worker.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.members.delete(worker.id);
        for (const c of member.calls.values()) c.reject(Object.assign(new Error('worker exited'), { gone: true }));
        reject(new Error(`${this.o.role} worker exited (${signal ?? code}) before it was ready`));
        if (this.closing) return;
        this.restarts.inc({ role: this.o.role });
        try {
          this.o.onExit?.({ pid: worker.process.pid ?? 0, code, signal, ready: member.ready });
        } catch (err) {
          this.o.logger.error({ role: this.o.role, err: (err as Error).message }, 'the pool\'s handler of a worker\'s exit failed');
        }
        // A worker that cannot start would otherwise be forked again at once, for ever.
        this.failedStarts = member.ready ? 0 : this.failedStarts + 1;
        const delayMs = this.failedStarts === 0 ? 0 : Math.min(30_000, 500 * 2 ** (this.failedStarts - 1));
        this.o.logger.error({ role: this.o.role, pid: worker.process.pid, code, signal, restartInMs: delayMs }, 'a worker died; forking its replacement (the other workers keep the listener)');
        setTimeout(() => {
          if (this.closing) return;
          this.fork().catch((err: Error) => this.o.logger.error({ role: this.o.role, err: err.message }, 'a replacement worker failed to start'));
        }, delayMs).unref();
      });
    });
    return ready;
  }
}

/** A `workers` setting as a count: 0 is one per core. */
export function workerCount(setting: number): number {
  return setting > 0 ? setting : Math.max(1, availableParallelism());
}

/**
 * The entry of a worker forked by `svc` itself: the same program again (the bundle, or the
 * sources through bin/svc.mjs), whose main runs the role SVC_WORKER_ROLE names instead of the
 * command line.
 */
export function sameProgramEntry(): WorkerEntry {
  return { exec: process.argv[1] ?? '', args: [], execArgv: process.execArgv };
}
