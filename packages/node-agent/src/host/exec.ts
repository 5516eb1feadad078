import { spawn } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
  timeoutMs?: number;
  /** Resolve with the exit code instead of throwing on a non-zero exit. */
  allowFail?: boolean;
  env?: NodeJS.ProcessEnv;
}

/** A host command that exited non-zero; the message carries its stderr. */
export class CommandError extends Error {
  constructor(readonly argv: string[], readonly result: RunResult) {
    const detail = (result.stderr || result.stdout).trim().split('\n').slice(-3).join(' | ');
    super(`${argv.join(' ')} exited ${result.code}${detail ? `: ${detail}` : ''}`);
    this.name = 'CommandError';
  }
}

/** Runs a host command to completion, capturing its output. */
export function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], env: opts.env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = opts.timeoutMs
      ? setTimeout(() => { stderr += `\n(killed after ${opts.timeoutMs} ms)`; child.kill('SIGKILL'); }, opts.timeoutMs)
      : undefined;
    let settled = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const result = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if (result.code !== 0 && !opts.allowFail) reject(new CommandError([cmd, ...args], result));
      else resolve(result);
    };
    child.on('error', (err) => { settled = true; clearTimeout(timer); reject(err); });
    child.on('close', finish);
    // A detached grandchild (runsc exec --detach) can keep the pipes open forever: once the
    // command itself has exited, give its output a moment to drain and then stop waiting.
    child.on('exit', (code, signal) => { setTimeout(() => finish(code, signal), 300).unref(); });
    child.stdin.on('error', () => { /* the command may exit before reading its input */ });
    child.stdin.end(opts.input ?? '');
  });
}
