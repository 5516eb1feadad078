/**
 * What `runCode` gives back, shaped like the `@e2b/code-interpreter` SDK's: an Execution built up
 * from the code interpreter's NDJSON lines (contracts/code-interpreter.ts), with the callbacks
 * called as each line is applied.
 */
import type { ErrorLine, ExecutionLine, ResultLine } from '@svc/contracts/code-interpreter';

/**
 * One display of a value (the last expression's, `isMainResult`, or a display call's), in every
 * representation the kernel produced: the fields of the wire's result line, `is_main_result` as
 * `isMainResult`. Binary formats (png, jpeg, pdf) are base64.
 */
export type Result = Omit<ResultLine, 'type' | 'is_main_result'> & { isMainResult: boolean };

/** The error the code raised: its name, its value (the message) and the traceback as one string. */
export type ExecutionError = Omit<ErrorLine, 'type'>;

/** What the code printed, in pieces as they came. */
export interface Logs {
  stdout: string[];
  stderr: string[];
}

/** One piece of output, as the streaming callbacks get it; prints as its text. */
export class OutputMessage {
  constructor(
    readonly line: string,
    /** When the kernel produced it (the e2b SDK gives a number here instead). */
    readonly timestamp: Date,
    /** True for stderr. */
    readonly error: boolean,
  ) {}

  toString(): string {
    return this.line;
  }
}

type Callback<T> = (value: T) => unknown;

export interface ExecutionCallbacks {
  onStdout?: Callback<OutputMessage>;
  onStderr?: Callback<OutputMessage>;
  onResult?: Callback<Result>;
  onError?: Callback<ExecutionError>;
}

/** How a run builds its Execution. */
export interface ExecutionKeeping {
  /**
   * svc's own (the e2b SDK has none): false hands output and results to the callbacks only, and the
   * Execution's `logs` and `results` stay empty (its error and count are kept), for a caller that
   * keeps what it needs itself. Default true.
   */
  keepOutput?: boolean;
}

export class Execution {
  results: Result[] = [];
  logs: Logs = { stdout: [], stderr: [] };
  error?: ExecutionError;
  /** The kernel's execution counter after this run (Python's `In [n]`). */
  executionCount?: number;

  /** The text of the main result, the value of the last expression. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }

  toJSON() {
    return { results: this.results, logs: this.logs, error: this.error, executionCount: this.executionCount, text: this.text };
  }
}

/**
 * Applies one line to `execution` and awaits its callback; true at `end_of_execution`, the last
 * line. Keepalives, `unexpected_end_of_execution` (an error line came before it) and types this
 * SDK does not know change nothing.
 */
export async function applyLine(execution: Execution, line: ExecutionLine, on: ExecutionCallbacks & ExecutionKeeping): Promise<boolean> {
  const keep = on.keepOutput !== false;
  switch (line.type) {
    case 'stdout':
      if (keep) execution.logs.stdout.push(line.text);
      await on.onStdout?.(new OutputMessage(line.text, timeOf(line.timestamp), false));
      return false;
    case 'stderr':
      if (keep) execution.logs.stderr.push(line.text);
      await on.onStderr?.(new OutputMessage(line.text, timeOf(line.timestamp), true));
      return false;
    case 'result': {
      const result = toResult(line);
      if (keep) execution.results.push(result);
      await on.onResult?.(result);
      return false;
    }
    case 'error': {
      const { name, value, traceback } = line;
      execution.error = { name, value, traceback };
      await on.onError?.(execution.error);
      return false;
    }
    case 'number_of_executions':
      execution.executionCount = line.execution_count;
      return false;
    case 'end_of_execution':
      return true;
    default:
      return false;
  }
}

function toResult(line: ResultLine): Result {
  const { type: _type, is_main_result: isMainResult, ...formats } = line;
  return { ...formats, isMainResult: isMainResult === true };
}

/** The line's time; the time it arrived when the server sent none that parses. */
function timeOf(timestamp: string | undefined): Date {
  const t = timestamp ? new Date(timestamp) : undefined;
  return t && !Number.isNaN(t.getTime()) ? t : new Date();
}
