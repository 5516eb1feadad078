/**
 * One execution's output on its way to the client, held back at the kernel while the client
 * reads slower than the kernel writes. Without it every line was written to the HTTP answer
 * whatever its backlog, so a client that stopped reading made the service hold all the output the
 * code printed (the whole service, with every other context, in one process).
 */
import type { ExecutionOutput } from '@svc/contracts/code-interpreter';
import type { OutputSink } from './kernel.ts';

/** What reads a kernel's output: stopped while the client is behind, started again after. */
export interface OutputSource {
  pause(): void;
  resume(): void;
}

export class Backpressure {
  private holding = false;
  private heldOnce = false;

  constructor(
    private readonly source: OutputSource,
    private readonly sink: OutputSink,
  ) {}

  /** Whether the kernel's output is being held back now. */
  get held(): boolean {
    return this.holding;
  }

  /** Whether it was held back at some time in this execution. */
  get wasHeld(): boolean {
    return this.heldOnce;
  }

  /** Passes a line to the client; stops reading the kernel when the client falls behind. */
  readonly send = (line: ExecutionOutput): void => {
    if (this.sink(line) || this.holding) return;
    this.holding = true;
    this.heldOnce = true;
    this.source.pause();
    void this.sink.drained().then(() => this.release());
  };

  /** Reads the kernel again; the execution calls it when it ends too, so the next one starts unheld. */
  release(): void {
    if (!this.holding) return;
    this.holding = false;
    this.source.resume();
  }
}
