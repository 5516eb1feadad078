/**
 * A Python context: an IPython kernel (`python3 -P -m ipykernel_launcher -f <connection file>`,
 * python-launch.ts) that we start ourselves and speak Jupyter messaging to (jupyter-client.ts).
 * Its output maps onto the execution lines as E2B's messaging.py maps it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Backpressure } from './backpressure.ts';
import { JupyterClient, type ConnectionInfo } from './jupyter-client.ts';
import type { JupyterMessage } from './jupyter-wire.ts';
import { environmentWith, type EnvChanges, type ExecutionEnd, type Kernel, type Log, type OutputSink } from './kernel.ts';
import { logChildOutput, logExit, signalGroup, stopGroup } from './kernel-process.ts';
import { findPython, kernelArgs, type PythonCommand } from './python-launch.ts';
import { ZmtpRefused } from './zmtp.ts';
import { PYTHON_STARTUP } from './python-startup.ts';
import { resultFromMimeBundle } from './result.ts';

const START_TIMEOUT_MS = 60_000;
/** How long an interrupted execution may take to stop before its kernel is ended instead. */
const INTERRUPT_GRACE_MS = 10_000;
/**
 * After its reply, how long an execution whose output was held back waits for the kernel's idle
 * status before it ends without it. ipykernel queues at most 1000 broadcasts for a reader that
 * stopped (zmq's PUB high-water mark) and drops the rest, the idle status among them; the
 * start-up code lifts that limit, and this covers a kernel where it could not.
 */
const IDLE_AFTER_REPLY_MS = 5_000;

export interface PythonKernelOptions {
  /** The Python to start (tests choose one); by default python-launch.ts finds it. */
  python?: () => Promise<PythonCommand>;
  /** The largest message taken from the kernel (zmtp.ts MAX_MESSAGE_BYTES by default). */
  maxMessageBytes?: number;
  /** IDLE_AFTER_REPLY_MS; tests shorten it. */
  idleAfterReplyMs?: number;
}

interface Session {
  child: ChildProcess;
  client: JupyterClient;
  dir: string;
  /** Resolves when the kernel process has ended or its connection is lost. */
  ended: Promise<void>;
  alive: boolean;
  /** Why the connection was lost, when the service broke it (a message past the limit). */
  lostReason?: string;
}

export class PythonKernel implements Kernel {
  readonly language = 'python' as const;
  private session: Session | undefined;
  private starting: Promise<Session> | undefined;
  private env: EnvChanges = {};

  constructor(
    readonly cwd: string,
    private readonly log: Log,
    private readonly opts: PythonKernelOptions = {},
  ) {}

  async start(): Promise<void> {
    await this.running();
  }

  execute(code: string, emit: OutputSink, signal: AbortSignal): Promise<ExecutionEnd> {
    return this.running().then((s) => this.run(s, code, emit, signal));
  }

  async setEnv(changes: EnvChanges): Promise<void> {
    Object.assign(this.env, changes);
    const s = this.session;
    if (!s?.alive) return; // a new process starts with them
    const set = Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== null));
    const unset = Object.keys(changes).filter((k) => changes[k] === null);
    const code = `__import__('os').environ.update(__import__('json').loads(${JSON.stringify(JSON.stringify(set))}))\n`
      + `[__import__('os').environ.pop(k, None) for k in __import__('json').loads(${JSON.stringify(JSON.stringify(unset))})]\n`;
    const reply = await this.runSilently(s, code);
    if (reply.content.status !== 'ok') throw new Error(`setting the environment failed: ${String(reply.content.evalue ?? reply.content.status)}`);
  }

  async interrupt(): Promise<void> {
    // Jupyter interrupts a kernel the same way: SIGINT to its process group.
    if (this.session?.alive) signalGroup(this.session.child, 'SIGINT');
  }

  async restart(): Promise<void> {
    await this.shutdown();
    await this.start();
  }

  async shutdown(): Promise<void> {
    const s = this.session ?? (await this.starting?.catch(() => { /* a failed start left no session to close; start's caller had the error */ return undefined; }));
    this.session = undefined;
    this.starting = undefined;
    if (!s) return;
    s.client.close();
    await stopGroup(s.child);
    rmSync(s.dir, { recursive: true, force: true });
  }

  private running(): Promise<Session> {
    if (this.session?.alive) return Promise.resolve(this.session);
    if (this.session) {
      // It ended on its own: clear it up and start again.
      const dead = this.session;
      this.session = undefined;
      rmSync(dead.dir, { recursive: true, force: true });
    }
    this.starting ??= this.launch().then(
      (s) => { this.session = s; this.starting = undefined; return s; },
      (err: Error) => { this.starting = undefined; throw err; },
    );
    return this.starting;
  }

  private async launch(): Promise<Session> {
    const started = Date.now();
    const python = await (this.opts.python ?? findPython)();
    const dir = mkdtempSync(join(tmpdir(), 'svc-kernel-'));
    const ports = await freePorts(5);
    const info: ConnectionInfo = {
      ip: '127.0.0.1',
      transport: 'tcp',
      shell_port: ports[0],
      iopub_port: ports[1],
      stdin_port: ports[2],
      control_port: ports[3],
      hb_port: ports[4],
      key: randomBytes(32).toString('hex'),
      signature_scheme: 'hmac-sha256',
      kernel_name: 'python3',
    };
    const file = join(dir, 'connection.json');
    writeFileSync(file, JSON.stringify(info), { mode: 0o600 });
    const child = spawn(python.path, kernelArgs(python, file), { cwd: this.cwd, env: environmentWith(this.env), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    logChildOutput(child, this.log, { language: 'python', pid: child.pid });
    let alive = true;
    let markEnded: () => void = () => {};
    const ended = new Promise<void>((resolve) => { markEnded = resolve; });
    const spawnFailed = new Promise<never>((_, reject) => child.once('error', reject));
    spawnFailed.catch(() => { /* seen by the start-up race below; later, the exit handler reports the end */ });
    child.once('exit', (code, signal) => {
      alive = false;
      if (session) session.alive = false;
      markEnded();
      logExit(child, this.log, 'python kernel', code, signal);
    });
    let session: Session | undefined;
    try {
      const client = await Promise.race([JupyterClient.connect(info, this.log, started + START_TIMEOUT_MS, () => alive, this.opts.maxMessageBytes), spawnFailed]);
      session = { child, client, dir, ended, alive };
      client.onLost = (err) => {
        this.log('warn', `python kernel connection lost: ${err.message}`, { pid: child.pid });
        if (session) {
          session.alive = false;
          // A connection the service broke says why in the execution's error; a kernel that died closed its own.
          if (err instanceof ZmtpRefused) session.lostReason = err.message;
        }
        markEnded();
        void stopGroup(child);
      };
      await client.waitForIopub(started + START_TIMEOUT_MS);
      const reply = await this.runSilently(session, PYTHON_STARTUP);
      if (reply.content.status !== 'ok') throw new Error(`the start-up code failed: ${String(reply.content.ename)}: ${String(reply.content.evalue)}`);
      this.log('info', 'python kernel started', { pid: child.pid, cwd: this.cwd, ms: Date.now() - started });
      return session;
    } catch (err) {
      session?.client.close();
      await stopGroup(child);
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`the python kernel did not start: ${(err as Error).message}`);
    }
  }

  private async runSilently(s: Session, code: string): Promise<JupyterMessage> {
    const r = s.client.request('shell', 'execute_request', { code, silent: true, store_history: false, user_expressions: {}, allow_stdin: false, stop_on_error: false });
    try {
      const reply = await Promise.race([r.reply, s.ended.then(() => { throw new Error('the kernel ended'); })]);
      return reply;
    } finally {
      r.done();
    }
  }

  private run(s: Session, code: string, emit: OutputSink, signal: AbortSignal): Promise<ExecutionEnd> {
    return new Promise<ExecutionEnd>((resolve) => {
      let idle = false;
      let replied = false;
      let errored = false;
      let interrupted = false;
      let graceTimer: NodeJS.Timeout | undefined;
      let idleTimer: NodeJS.Timeout | undefined;
      const flow = new Backpressure({ pause: () => s.client.pauseBroadcasts(), resume: () => s.client.resumeBroadcasts() }, emit);
      const send = flow.send;
      const finish = (end: ExecutionEnd) => {
        clearTimeout(graceTimer);
        clearTimeout(idleTimer);
        signal.removeEventListener('abort', onAbort);
        flow.release();
        request.done();
        resolve(end);
      };
      const emitError = (name: string, value: string, traceback: string) => {
        if (errored) return;
        errored = true;
        send({ type: 'error', name, value, traceback });
      };
      // Only a kernel whose broadcasts were held back can have dropped the idle status (IDLE_AFTER_REPLY_MS).
      const awaitIdle = () => {
        if (!replied || idle || !flow.wasHeld) return;
        clearTimeout(idleTimer);
        idleTimer = setTimeout(() => {
          if (flow.held) return awaitIdle();
          this.log('warn', 'the python kernel dropped broadcasts while the client read slowly; the execution ends without its idle status', { pid: s.child.pid });
          send({ type: 'stderr', text: '[svc] the kernel dropped some output of this execution while the client was reading slower than it printed: the output above may be incomplete\n', timestamp: new Date().toISOString() });
          finish(interrupted ? 'interrupted' : 'completed');
        }, this.opts.idleAfterReplyMs ?? IDLE_AFTER_REPLY_MS);
      };
      const onBroadcast = (m: JupyterMessage) => {
        const c = m.content;
        switch (m.header.msg_type) {
          case 'execute_input':
            send({ type: 'number_of_executions', execution_count: Number(c.execution_count) });
            break;
          case 'stream':
            send({ type: c.name === 'stderr' ? 'stderr' : 'stdout', text: String(c.text), timestamp: m.header.date });
            break;
          case 'display_data':
            send(resultFromMimeBundle(c.data as Record<string, unknown>, false));
            break;
          case 'execute_result':
            send(resultFromMimeBundle(c.data as Record<string, unknown>, true));
            break;
          case 'error':
            emitError(String(c.ename), String(c.evalue), (c.traceback as string[]).join('\n'));
            break;
          case 'status':
            if (c.execution_state === 'idle') {
              idle = true;
              if (replied) finish(interrupted ? 'interrupted' : 'completed');
            }
            break;
          default:
            break; // clear_output, update_display_data and comms have no execution line
        }
        awaitIdle();
      };
      // stop_on_error false: a context runs one execution at a time (its lock), so there is no queue
      // to abort, and with it ipykernel aborts an execution that arrives just after an error
      // (its abort window closes on a later dispatch; seen in CI as the next cell's lost result).
      const request = s.client.request('shell', 'execute_request', { code, silent: false, store_history: true, user_expressions: {}, allow_stdin: false, stop_on_error: false }, onBroadcast);
      void request.reply.then((m) => {
        replied = true;
        const c = m.content;
        if (c.status === 'error') emitError(String(c.ename ?? ''), String(c.evalue ?? ''), ((c.traceback as string[] | undefined) ?? []).join('\n'));
        else if (c.status === 'aborted') emitError('ExecutionAborted', 'Execution was aborted', '');
        if (idle) finish(interrupted ? 'interrupted' : 'completed');
        else awaitIdle();
      });
      void s.ended.then(() => finish(s.lostReason ? { died: s.lostReason } : 'died'));
      const onAbort = () => {
        interrupted = true;
        void this.interrupt();
        graceTimer = setTimeout(() => {
          this.log('warn', 'an interrupted python execution did not stop; ending its kernel', { pid: s.child.pid });
          void stopGroup(s.child);
          finish('interrupted');
        }, INTERRUPT_GRACE_MS);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** Five (or n) distinct free loopback ports, held open together so that they differ. */
async function freePorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const srv = createServer();
      servers.push(srv);
      await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, '127.0.0.1', resolve));
    }
    return servers.map((s) => (s.address() as { port: number }).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}
