import type { ProcessConfig } from '@svc/contracts/envd/process/process_pb';
import type { ExitInfo } from './exit-status.ts';

export type OutputKind = 'stdout' | 'stderr' | 'pty';

export interface ProcessListener {
  output(kind: OutputKind, data: Buffer): void;
  end(exit: ExitInfo): void;
}

/**
 * A process started by envd. Output goes to whoever is subscribed at that moment (nothing is
 * buffered for later subscribers, as in E2B's envd); a slow subscriber can hold the output,
 * which pauses reading so the process blocks instead of envd buffering without bound.
 */
export abstract class ManagedProcess {
  private readonly listeners = new Set<ProcessListener>();
  private holds = 0;
  private endTimer: NodeJS.Timeout | undefined;
  exit: ExitInfo | undefined;

  protected constructor(
    readonly pid: number,
    readonly config: ProcessConfig,
    readonly tag: string | undefined,
  ) {}

  abstract readonly isPty: boolean;
  abstract writeStdin(data: Uint8Array): Promise<void>;
  abstract closeStdin(): void;
  /** A promise where the input waits for something first (pty-signals.ts). */
  abstract writePty(data: Uint8Array): void | Promise<void>;
  abstract resize(cols: number, rows: number): void;
  protected abstract pauseOutput(): void;
  protected abstract resumeOutput(): void;
  /** Stops waiting for the output pipes, so the end is reported as soon as the process exits. */
  protected abstract detachOutput(): void;

  get running(): boolean {
    return this.exit === undefined;
  }

  subscribe(listener: ProcessListener): () => void {
    if (this.exit) {
      listener.end(this.exit);
      return () => {};
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Pauses output until the returned release function is called. */
  holdOutput(): () => void {
    if (this.holds++ === 0) this.pauseOutput();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds === 0) this.resumeOutput();
    };
  }

  signal(signal: 'SIGKILL' | 'SIGTERM'): void {
    if (!this.running) return;
    this.detachOutput();
    try {
      process.kill(this.pid, signal);
    } catch (err) {
      // Already gone, its end just not reported yet.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }

  /** Resolves true once the process's end is reported, false when `ms` pass first. */
  ended(ms: number): Promise<boolean> {
    if (this.exit) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { unsubscribe(); resolve(false); }, ms);
      const unsubscribe = this.subscribe({ output: () => {}, end: () => { clearTimeout(timer); resolve(true); } });
    });
  }

  /** Kills the process when the client's deadline passes (E2B's envd does the same). */
  killAfter(ms: number): void {
    this.endTimer = setTimeout(() => this.signal('SIGKILL'), ms);
    this.endTimer.unref();
  }

  protected emitOutput(kind: OutputKind, data: Buffer): void {
    for (const listener of this.listeners) listener.output(kind, data);
  }

  protected emitEnd(exit: ExitInfo): void {
    if (this.exit) return;
    this.exit = exit;
    clearTimeout(this.endTimer);
    const listeners = [...this.listeners];
    this.listeners.clear();
    for (const listener of listeners) listener.end(exit);
  }
}
