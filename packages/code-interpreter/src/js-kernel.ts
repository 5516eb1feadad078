/**
 * A JavaScript or TypeScript context: a child Node process running the REPL host
 * (js-repl-host.ts). TypeScript is transpiled to JavaScript here first (types removed, nothing
 * else changed), so both languages share the host; static imports become dynamic (esm-imports.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { transform } from 'sucrase';
import { environmentWith, type EnvChanges, type ExecutionEnd, type Kernel, type Log, type OutputSink } from './kernel.ts';
import { logExit, signalGroup, stopGroup } from './kernel-process.ts';
import { rewriteImports } from './esm-imports.ts';
import { REPL_HOST_SOURCE } from './js-repl-host.ts';
import { resultFromMimeBundle } from './result.ts';

const START_TIMEOUT_MS = 30_000;
const INTERRUPT_GRACE_MS = 5_000;

type HostMessage =
  | { type: 'ready' | 'env-set' }
  | { type: 'stream'; id: string; name: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; id: string; text: string }
  | { type: 'error'; id: string; name: string; value: string; traceback: string }
  | { type: 'done'; id: string };

interface Host {
  child: ChildProcess;
  alive: boolean;
  ended: Promise<void>;
  executions: number;
  /** Where the host's messages and its processes' raw output go while an execution runs. */
  onMessage: (m: HostMessage) => void;
  onRawOutput: (name: 'stdout' | 'stderr', text: string) => void;
}

export class JsKernel implements Kernel {
  private host: Host | undefined;
  private starting: Promise<Host> | undefined;
  private env: EnvChanges = {};

  constructor(
    readonly language: 'javascript' | 'typescript',
    readonly cwd: string,
    private readonly log: Log,
  ) {}

  async start(): Promise<void> {
    await this.running();
  }

  async execute(code: string, emit: OutputSink, signal: AbortSignal): Promise<ExecutionEnd> {
    const host = await this.running();
    host.executions += 1;
    emit({ type: 'number_of_executions', execution_count: host.executions });
    let source = code;
    if (this.language === 'typescript') {
      const js = transpile(code);
      if (typeof js !== 'string') {
        emit({ type: 'error', name: 'SyntaxError', value: js.message, traceback: `SyntaxError: ${js.message}` });
        return 'completed';
      }
      source = js;
    }
    source = rewriteImports(source);
    const id = randomUUID();
    const now = () => new Date().toISOString();
    const idleOutput = host.onRawOutput;
    return new Promise<ExecutionEnd>((resolve) => {
      let interrupted = false;
      let graceTimer: NodeJS.Timeout | undefined;
      const finish = (end: ExecutionEnd) => {
        clearTimeout(graceTimer);
        signal.removeEventListener('abort', onAbort);
        host.onMessage = () => {};
        host.onRawOutput = idleOutput;
        resolve(end);
      };
      host.onMessage = (m) => {
        if (!('id' in m) || m.id !== id) return;
        if (m.type === 'stream') emit({ type: m.name, text: m.text, timestamp: now() });
        else if (m.type === 'result') emit(resultFromMimeBundle({ 'text/plain': m.text }, true));
        else if (m.type === 'error') emit({ type: 'error', name: m.name, value: m.value, traceback: m.traceback });
        else if (m.type === 'done') finish(interrupted ? 'interrupted' : 'completed');
      };
      host.onRawOutput = (name, text) => emit({ type: name, text, timestamp: now() });
      void host.ended.then(() => finish('died'));
      const onAbort = () => {
        interrupted = true;
        void this.interrupt();
        graceTimer = setTimeout(() => {
          this.log('warn', `an interrupted ${this.language} execution did not stop; ending its process`, { pid: host.child.pid });
          void stopGroup(host.child);
          finish('interrupted');
        }, INTERRUPT_GRACE_MS);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      host.child.send({ type: 'execute', id, code: source });
    });
  }

  async setEnv(changes: EnvChanges): Promise<void> {
    Object.assign(this.env, changes);
    const host = this.host;
    if (!host?.alive) return; // a new process starts with them
    await new Promise<void>((resolve, reject) => {
      const previous = host.onMessage;
      host.onMessage = (m) => {
        if (m.type !== 'env-set') return previous(m);
        host.onMessage = previous;
        resolve();
      };
      void host.ended.then(() => reject(new Error('the process ended')));
      host.child.send({ type: 'env', changes });
    });
  }

  async interrupt(): Promise<void> {
    if (this.host?.alive) signalGroup(this.host.child, 'SIGINT');
  }

  async restart(): Promise<void> {
    await this.shutdown();
    await this.start();
  }

  async shutdown(): Promise<void> {
    const host = this.host ?? (await this.starting?.catch(() => { /* a failed start left no host to stop; start's caller had the error */ return undefined; }));
    this.host = undefined;
    this.starting = undefined;
    if (host) await stopGroup(host.child);
  }

  private running(): Promise<Host> {
    if (this.host?.alive) return Promise.resolve(this.host);
    this.host = undefined;
    this.starting ??= this.launch().then(
      (h) => { this.host = h; this.starting = undefined; return h; },
      (err: Error) => { this.starting = undefined; throw err; },
    );
    return this.starting;
  }

  private launch(): Promise<Host> {
    const started = Date.now();
    const [node, ...nodeArgs] = nodeCommand();
    const child = spawn(node, [...nodeArgs, '-e', REPL_HOST_SOURCE], {
      cwd: this.cwd,
      env: environmentWith(this.env),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let markEnded: () => void = () => {};
    const host: Host = {
      child,
      alive: true,
      ended: new Promise<void>((resolve) => { markEnded = resolve; }),
      executions: 0,
      onMessage: () => {},
      onRawOutput: (name, text) => this.log('info', `kernel ${name}: ${text.trimEnd()}`, { pid: child.pid }),
    };
    child.on('message', (m: HostMessage) => host.onMessage(m));
    child.on('error', (err) => this.log('warn', `${this.language} kernel: ${err.message}`, { pid: child.pid }));
    // Output that bypassed the host's console, from programs the code started with inherited stdio.
    child.stdout?.on('data', (d: Buffer) => host.onRawOutput('stdout', d.toString('utf8')));
    child.stderr?.on('data', (d: Buffer) => host.onRawOutput('stderr', d.toString('utf8')));
    child.once('exit', (code, signal) => {
      host.alive = false;
      markEnded();
      logExit(child, this.log, `${this.language} kernel`, code, signal);
    });
    return new Promise<Host>((resolve, reject) => {
      const timer = setTimeout(() => { void stopGroup(child); reject(new Error(`the ${this.language} kernel did not start in ${START_TIMEOUT_MS} ms`)); }, START_TIMEOUT_MS);
      child.once('error', (err) => { clearTimeout(timer); reject(new Error(`the ${this.language} kernel did not start: ${err.message}`)); });
      void host.ended.then(() => { clearTimeout(timer); reject(new Error(`the ${this.language} kernel ended while starting`)); });
      host.onMessage = (m) => {
        if (m.type !== 'ready') return;
        clearTimeout(timer);
        host.onMessage = () => {};
        this.log('info', `${this.language} kernel started`, { pid: child.pid, cwd: this.cwd, ms: Date.now() - started });
        resolve(host);
      };
    });
  }
}

/** TypeScript as JavaScript: type annotations, interfaces and enums compiled away; or the syntax error. */
function transpile(code: string): string | Error {
  try {
    return transform(code, { transforms: ['typescript'], disableESTransforms: true }).code;
  } catch (err) {
    return err as Error;
  }
}

/**
 * How to start Node: SVC_CODE_INTERPRETER_NODE when the service runs on the /.svc runtime, whose
 * execPath is its loader (SANDBOX_NODE_COMMAND), else this process's own binary.
 */
function nodeCommand(): string[] {
  const given = process.env.SVC_CODE_INTERPRETER_NODE?.trim();
  return given ? given.split(/\s+/) : [process.execPath];
}
