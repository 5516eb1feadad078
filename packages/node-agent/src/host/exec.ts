import { CommandHelper, commandHelper, type HelperReply } from './command-helper.ts';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  /** Standard input from this file instead (large or binary input). */
  inputFile?: string;
  timeoutMs?: number;
  /** Resolve with the exit code instead of throwing on a non-zero exit. */
  allowFail?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Append the command's stdout and stderr to this file instead of capturing them. */
  logPath?: string;
  /** The output as it comes, besides the whole of it in the result. */
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
  /**
   * What the command does, in words a team may read ("restoring the snapshot's filesystem"): a
   * failure's answer says this instead of the command line (sandboxes/public-reason.ts).
   */
  what?: string;
}

/**
 * A host command that exited non-zero; the message carries its command line and stderr, for the
 * node's log only (host paths: sandboxes/public-reason.ts says what a team reads instead).
 */
export class CommandError extends Error {
  constructor(readonly argv: string[], readonly result: RunResult, readonly what?: string) {
    const detail = (result.stderr || result.stdout).trim().split('\n').slice(-3).join(' | ');
    super(`${argv.join(' ')} exited ${result.code}${detail ? `: ${detail}` : ''}`);
    this.name = 'CommandError';
  }
}

/**
 * Runs a host command to completion, capturing its output (started by the command helper, so
 * the fork does not stall this process: host/command-helper.ts).
 */
export async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  const reply = await commandHelper.request({ cmd, args, input: opts.input, inputFile: opts.inputFile, timeoutMs: opts.timeoutMs, env: opts.env, logPath: opts.logPath }, opts.onOutput);
  const startError = CommandHelper.startError(reply);
  if (startError) throw startError;
  const result = { code: exitCodeOf(reply), stdout: reply.stdout ?? '', stderr: reply.stderr ?? '' };
  if (result.code !== 0 && !opts.allowFail) throw new CommandError([cmd, ...args], result, opts.what);
  return result;
}

/**
 * Starts a host command that keeps running on its own (detached, output ignored). Resolves with
 * its exit code when it ends within `earlyMs`, else with code 0 while it runs on.
 */
export async function runInBackground(cmd: string, args: string[], earlyMs: number): Promise<RunResult> {
  const reply = await commandHelper.request({ cmd, args, backgroundEarlyMs: earlyMs });
  const startError = CommandHelper.startError(reply);
  if (startError) return { code: 127, stdout: '', stderr: startError.message };
  return { code: exitCodeOf(reply), stdout: '', stderr: '' };
}

/** A command ended by a signal has no exit code: 128 stands for it (1 when neither is known). */
function exitCodeOf(reply: HelperReply): number {
  return reply.code ?? (reply.signal ? 128 : 1);
}
