import type { BuildLog, Level } from './build-log.ts';

/** Output lines of one step written to the build log as they come; of the rest, the last STEP_LOG_TAIL. */
const STEP_LOG_LINES = 1000;
const STEP_LOG_TAIL = 100;

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
    this.partial[stream] = lines.pop()!;
    for (const line of lines) this.line(stream === 'stdout' ? 'info' : 'warn', line);
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

  private line(level: Level, line: string): void {
    if (line === '') return;
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
