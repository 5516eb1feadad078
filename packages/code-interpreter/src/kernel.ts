import type { CodeLanguage, ExecutionOutput } from '@svc/contracts/code-interpreter';

/**
 * How an execution ended: it ran to its end (with or without an error), it was interrupted
 * because its client went away, or the kernel process ended under it.
 */
export type ExecutionEnd = 'completed' | 'interrupted' | 'died';

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
  execute(code: string, emit: (line: ExecutionOutput) => void, signal: AbortSignal): Promise<ExecutionEnd>;
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
