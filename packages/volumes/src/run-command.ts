/**
 * Runs a program with a deadline and bounded output, and never rejects: plugin binaries and the
 * local plugin's mount and umount go through it. The program runs in its own process group
 * (no shell), with the environment less svc's secrets; at the deadline the whole group gets
 * SIGKILL, so helpers it started die with it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { hostCommandEnv } from '@svc/common';

export interface RunOptions {
  timeoutMs: number;
  /** Bytes of stdout kept; more makes `stdoutOverflow` true (the answer is then unusable). */
  maxStdoutBytes?: number;
  /** Bytes of stderr kept: the last ones. */
  maxStderrBytes?: number;
}

export interface RunResult {
  /** The process's id, which is also its process group's (undefined when it did not start). */
  pid: number | undefined;
  /** Exit code, null when a signal ended it or it did not start. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stdoutOverflow: boolean;
  /** Its tail, at most maxStderrBytes. */
  stderr: string;
  timedOut: boolean;
  /** Set when the program could not be started (ENOENT, EACCES, ...). */
  spawnError?: NodeJS.ErrnoException;
}

const DEFAULT_STDOUT_BYTES = 64 * 1024;
const DEFAULT_STDERR_BYTES = 8 * 1024;
/** After the program exits, how long its output pipes may stay open (held by a child it left behind). */
const PIPE_GRACE_MS = 500;
/** After SIGKILL, how long to wait for the exit (a process stuck in the kernel may never exit). */
const KILL_GRACE_MS = 1_000;

export function runCommand(file: string, args: string[], opts: RunOptions): Promise<RunResult> {
  const maxStdout = opts.maxStdoutBytes ?? DEFAULT_STDOUT_BYTES;
  const maxStderr = opts.maxStderrBytes ?? DEFAULT_STDERR_BYTES;
  return new Promise((resolve) => {
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stdoutOverflow = false;
    let stderr: Buffer[] = [];
    let stderrBytes = 0;
    let code: number | null = null;
    let signal: NodeJS.Signals | null = null;
    let timedOut = false;
    let spawnError: NodeJS.ErrnoException | undefined;
    let settled = false;
    const timers: NodeJS.Timeout[] = [];

    let child: ChildProcess;
    try {
      // Not the master's or node agent's whole environment: a plugin is a third party's program,
      // and that environment holds the cluster token and the database's URL (host-command-env.ts).
      child = spawn(file, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], shell: false, env: hostCommandEnv() });
    } catch (err) {
      // refused before any process: an argument with a NUL byte, a bad path type
      const e = err as NodeJS.ErrnoException;
      return resolve({ pid: undefined, code: null, signal: null, stdout: '', stdoutOverflow: false, stderr: '', timedOut: false, spawnError: e });
    }

    const finish = () => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      child.stdout?.destroy();
      child.stderr?.destroy();
      const err = Buffer.concat(stderr);
      resolve({
        pid: child.pid,
        code,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stdoutOverflow,
        stderr: err.subarray(Math.max(0, err.length - maxStderr)).toString('utf8'),
        timedOut,
        spawnError,
      });
    };

    child.stdout?.on('data', (chunk: Buffer) => {
      if (stdoutOverflow) return;
      if (stdoutBytes + chunk.length > maxStdout) {
        stdoutOverflow = true;
        stdout.push(chunk.subarray(0, maxStdout - stdoutBytes));
        stdoutBytes = maxStdout;
        return;
      }
      stdout.push(chunk);
      stdoutBytes += chunk.length;
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr.push(chunk);
      stderrBytes += chunk.length;
      if (stderrBytes > 2 * maxStderr) {
        const tail = Buffer.concat(stderr);
        stderr = [tail.subarray(tail.length - maxStderr)];
        stderrBytes = maxStderr;
      }
    });
    // a read error on a pipe ends the output there; the exit decides the result
    child.stdout?.on('error', () => undefined);
    child.stderr?.on('error', () => undefined);

    child.on('error', (err: NodeJS.ErrnoException) => {
      // 'error' without a pid: the program did not start; with one, a failed kill (ignored: the deadline path handles it)
      if (child.pid === undefined) {
        spawnError = err;
        finish();
      }
    });
    child.on('exit', (c, s) => {
      code = c;
      signal = s;
      if (timedOut) finish();
      else timers.push(setTimeout(finish, PIPE_GRACE_MS));
    });
    child.on('close', () => finish());

    timers.push(
      setTimeout(() => {
        if (settled || child.pid === undefined) return;
        // it exited in time and something it left holds its pipes: the answer is what arrived
        if (code !== null || signal !== null) return finish();
        timedOut = true;
        killGroup(child.pid);
        timers.push(setTimeout(finish, KILL_GRACE_MS));
      }, opts.timeoutMs),
    );
  });
}

/** SIGKILL to the process group `pid` leads, else to the process alone; never throws. */
function killGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
      return;
    } catch {
      // ESRCH: no such group (or process) any more; EPERM cannot happen for our own child. Try the next target.
    }
  }
}
