import type { CodeLanguage, ExecutionOutput } from '@svc/contracts/code-interpreter';

/**
 * How an execution ended: it ran to its end (with or without an error), it was interrupted
 * because its client went away, or the kernel process (or the connection to it) ended under it,
 * with the reason when the service knows one (a message past the size limit).
 */
export type ExecutionEnd = 'completed' | 'interrupted' | 'died' | { died: string };

/**
 * Where an execution's output lines go: the client's answer. A call returns false once the client
 * has fallen behind (what it has not read yet is past a limit); a kernel that can stop reading its
 * process's output does so until `drained()` resolves, which it does at once when the client is
 * not behind or has gone. So a slow client holds its own kernel back, not the service's memory.
 */
export interface OutputSink {
  (line: ExecutionOutput): boolean;
  drained(): Promise<void>;
}

/** Environment changes: a string sets the variable, null removes it. */
export type EnvChanges = Record<string, string | null>;

/**
 * One kind of kernel (Python over Jupyter, JavaScript/TypeScript, bash). The HTTP layer knows only
 * this. Calls are not concurrent: the context's lock runs one at a time. A kernel whose process
 * ended starts again at its next execute, as Jupyter's own restarter does.
 */
export interface Kernel {
  readonly language: CodeLanguage;
  readonly cwd: string;
  /** Starts the process (execute starts it too when it is not running). */
  start(): Promise<void>;
  /**
   * Runs code, reporting its output through `emit` as it comes. When `signal` aborts, the kernel
   * is interrupted and execute resolves once it is idle again ('interrupted').
   */
  execute(code: string, emit: OutputSink, signal: AbortSignal): Promise<ExecutionEnd>;
  /** Changes the environment of the running process and of the processes it starts later. */
  setEnv(changes: EnvChanges): Promise<void>;
  interrupt(): Promise<void>;
  /** A fresh process: variables are gone, the cwd and environment changes are kept. */
  restart(): Promise<void>;
  shutdown(): Promise<void>;
}

/** Logs one structured line (the service's log goes to stdout as JSON lines). */
export type Log = (level: 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;

/** The process environment with the kernel's changes applied. */
export function environmentWith(changes: EnvChanges, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const [k, v] of Object.entries(changes)) {
    if (v === null) delete env[k];
    else env[k] = v;
  }
  return env;
}
