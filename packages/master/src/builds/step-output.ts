import type { BuildLog, Level } from './build-log.ts';

/** Output lines of one step written to the build log as they come; of the rest, the last STEP_LOG_TAIL. */
const STEP_LOG_LINES = 1000;
const STEP_LOG_TAIL = 100;
/**
 * The longest log entry: a longer line is cut there, and a line still unfinished past it is
 * written as it stands. A step printing gigabytes without a newline grew one string in the
 * master until it fell over, and each of its first thousand lines went to the database whole.
 */
export const STEP_LOG_LINE_MAX = 16 * 1024;

/**
 * A step's output in the build log as it comes, a line an entry (stdout info, stderr warn): the
 * first STEP_LOG_LINES lines, then, when the step ends, how many were left out and the last ones.
 */
export class StepOutput {
  private readonly partial = { stdout: '', stderr: '' };
  private written = 0;
  private skipped = 0;
  private readonly tail: Array<[Level, string]> = [];
  private chain = Promise.resolve();

  constructor(private readonly log: BuildLog) {}

  add(stream: 'stdout' | 'stderr', text: string): void {
    const lines = (this.partial[stream] + text).split('\n');
    let rest = lines.pop()!;
    const level = stream === 'stdout' ? 'info' : 'warn';
    for (const line of lines) this.line(level, line);
    while (rest.length > STEP_LOG_LINE_MAX) {
      this.line(level, rest.slice(0, STEP_LOG_LINE_MAX));
      rest = rest.slice(STEP_LOG_LINE_MAX);
    }
    this.partial[stream] = rest;
  }

  /** Writes what is left: unfinished lines, and the tail of a step that said too much. */
  async end(): Promise<void> {
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.partial[stream]) this.line(stream === 'stdout' ? 'info' : 'warn', this.partial[stream]);
      this.partial[stream] = '';
    }
    if (this.skipped) {
      this.write('info', `… ${this.skipped - this.tail.length} line(s) of output not shown …`);
      for (const [level, line] of this.tail) this.write(level, line);
    }
    await this.chain;
  }

  private line(level: Level, whole: string): void {
    if (whole === '') return;
    const line = whole.length > STEP_LOG_LINE_MAX ? `${whole.slice(0, STEP_LOG_LINE_MAX)} … (${whole.length - STEP_LOG_LINE_MAX} more characters)` : whole;
    if (this.written < STEP_LOG_LINES) {
      this.written++;
      this.write(level, line);
      return;
    }
    this.skipped++;
    this.tail.push([level, line]);
    if (this.tail.length > STEP_LOG_TAIL) this.tail.shift();
  }

  /** In order: each entry waits for the one before; one that fails fails the step's end. */
  private write(level: Level, message: string): void {
    this.chain = this.chain.then(() => this.log(level, message));
  }
}
