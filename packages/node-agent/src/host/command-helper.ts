import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { essentialHostEnv } from '@svc/common';

/**
 * Host commands started by a small helper process instead of by this one.
 *
 * Node starts a child with fork(), which copies the page tables of the whole process while the
 * event loop waits: about 3 ms for a bare Node process, about 28 ms once it holds 250 MB (measured
 * here, docs/design.md "Host commands"). The node agent starts a dozen commands for every sandbox
 * boot (ip, nft, mount, runsc) and more for every kill; in `svc up`, where the API, the master and
 * the proxy share the agent's event loop, that stalled every request by a quarter of a second per
 * boot. The helper is a bare Node process: its forks are cheap and block nobody else.
 */

/** What the helper is asked to run. */
export interface HelperRequest {
  id: number;
  cmd: string;
  args: string[];
  input?: string;
  /** A file to read the command's standard input from (large or binary input). */
  inputFile?: string;
  timeoutMs?: number;
  env?: Record<string, string | undefined>;
  /** Append stdout and stderr to this file instead of capturing them (stdin is then empty). */
  logPath?: string;
  /** Also send the output while the command runs, as HelperOutput messages. */
  stream?: boolean;
  /**
   * Leave the command running on its own (detached, output ignored): the answer comes when it
   * exits within this many ms (its code), or after them (code 0, still running).
   */
  backgroundEarlyMs?: number;
}

/** Output of a command asked to stream, sent as it comes (the reply carries its last 1 MiB). */
interface HelperOutput {
  id: number;
  out: 'stdout' | 'stderr';
  data: string;
}

/** How it ended: exit code or signal and output, or why it could not start. */
export interface HelperReply {
  id: number;
  code?: number | null;
  signal?: string | null;
  stdout?: string;
  stderr?: string;
  error?: { message: string; code?: string };
}

/**
 * The helper's whole program. It runs as `node -e` source (Function#toString), so it uses only
 * what it loads itself; `__name` is what esbuild's keepNames (tsx) wraps functions in.
 */
function helperMain(): void {
  const childProcess = process.getBuiltinModule('node:child_process');
  const fs = process.getBuiltinModule('node:fs');
  const readline = process.getBuiltinModule('node:readline');
  const send = (m: HelperReply | HelperOutput) => process.stdout.write(JSON.stringify(m) + '\n');
  const failed = (id: number, err: NodeJS.ErrnoException) => send({ id, error: { message: err.message, code: err.code } });

  const start = (r: HelperRequest) => {
    const env = (r.env ?? process.env) as NodeJS.ProcessEnv;
    if (r.backgroundEarlyMs !== undefined) {
      const child = childProcess.spawn(r.cmd, r.args, { stdio: 'ignore', detached: true, env });
      let answered = false;
      const answer = (m: HelperReply) => { if (!answered) { answered = true; send(m); } };
      const timer = setTimeout(() => { answer({ id: r.id, code: 0, stdout: '', stderr: '' }); child.unref(); }, r.backgroundEarlyMs);
      child.once('exit', (code, signal) => { clearTimeout(timer); answer({ id: r.id, code, signal, stdout: '', stderr: '' }); });
      child.once('error', (err) => { clearTimeout(timer); if (!answered) { answered = true; failed(r.id, err); } });
      return;
    }
    let logFd: number | undefined;
    let inputFd: number | undefined;
    let child: import('node:child_process').ChildProcess;
    try {
      logFd = r.logPath ? fs.openSync(r.logPath, 'a', 0o600) : undefined;
      inputFd = r.inputFile ? fs.openSync(r.inputFile, 'r') : undefined;
      // With a log file, nothing of the helper is handed on: a daemon it starts (runsc's sandbox)
      // holds that file only.
      child = childProcess.spawn(r.cmd, r.args, { stdio: logFd !== undefined ? ['ignore', logFd, logFd] : [inputFd ?? 'pipe', 'pipe', 'pipe'], env });
    } catch (err) {
      failed(r.id, err as NodeJS.ErrnoException);
      return;
    } finally {
      if (logFd !== undefined) fs.closeSync(logFd);
      if (inputFd !== undefined) fs.closeSync(inputFd);
    }
    let stdout = '';
    let stderr = '';
    // Bounded: a build's `yes` ran for its 20 minutes into these strings, past V8's longest
    // string, and took the helper (every host command of the node) down with it. A streamed
    // command's reader saw all of its output: the reply keeps its last 1 MiB. A host command's
    // whole output is kept (callers parse it) up to 64 MiB, past which it is killed.
    const STREAM_TAIL = 1024 * 1024;
    const CAPTURE_MAX = 64 * 1024 * 1024;
    let overflowed = false;
    const keep = (acc: string, d: string): string => {
      const next = acc + d;
      if (r.stream) return next.length > 2 * STREAM_TAIL ? next.slice(-STREAM_TAIL) : next;
      if (next.length <= CAPTURE_MAX) return next;
      if (!overflowed) { overflowed = true; child.kill('SIGKILL'); }
      return acc;
    };
    child.stdout?.setEncoding('utf8').on('data', (d: string) => { stdout = keep(stdout, d); if (r.stream) send({ id: r.id, out: 'stdout', data: d }); });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => { stderr = keep(stderr, d); if (r.stream) send({ id: r.id, out: 'stderr', data: d }); });
    const timer = r.timeoutMs
      ? setTimeout(() => { stderr += `\n(killed after ${r.timeoutMs} ms)`; child.kill('SIGKILL'); }, r.timeoutMs)
      : undefined;
    let settled = false;
    const finish = (code: number | null, signal: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (overflowed) stderr += `\n(killed: its output passed ${CAPTURE_MAX} characters)`;
      send({ id: r.id, code, signal, stdout, stderr });
    };
    child.on('error', (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      failed(r.id, err);
    });
    child.on('close', finish);
    // A detached grandchild (runsc exec --detach) can keep the pipes open forever: once the
    // command itself has exited, give its output a moment to drain and then stop waiting.
    child.on('exit', (code, signal) => { setTimeout(() => finish(code, signal), 300).unref(); });
    child.stdin?.on('error', () => { /* the command may exit before reading its input */ });
    child.stdin?.end(r.input ?? '');
  };

  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    let r: HelperRequest;
    try {
      r = JSON.parse(line) as HelperRequest;
    } catch {
      process.stderr.write(`svc command helper: not a request: ${line.slice(0, 200)}\n`);
      return;
    }
    try {
      start(r);
    } catch (err) {
      failed(r.id, err as NodeJS.ErrnoException);
    }
  }).on('close', () => process.exit(0));
}

/** An error from the helper that says a command could not start (ENOENT and the like). */
class StartError extends Error {
  constructor(message: string, readonly code?: string) {
    super(message);
  }
}

/**
 * The parent's end: one helper per process, started on first use and again after a crash. It
 * does not keep the process alive by itself; requests under way do, as their own children would.
 */
export class CommandHelper {
  private child: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, (reply: HelperReply) => void>();
  private readonly listeners = new Map<number, (out: 'stdout' | 'stderr', data: string) => void>();
  private keepAlive: NodeJS.Timeout | undefined;

  /** Runs a command; with `onOutput`, its output is also handed over while it runs. */
  request(req: Omit<HelperRequest, 'id' | 'stream'>, onOutput?: (out: 'stdout' | 'stderr', data: string) => void): Promise<HelperReply> {
    const child = this.ensure();
    const id = this.nextId++;
    if (onOutput) this.listeners.set(id, onOutput);
    return new Promise<HelperReply>((resolve) => {
      this.pending.set(id, resolve);
      this.keepAlive ??= setInterval(() => { /* holds the event loop while commands run */ }, 1 << 30);
      child.stdin!.write(JSON.stringify({ ...req, id, ...(onOutput ? { stream: true } : {}) }) + '\n');
    }).finally(() => {
      this.listeners.delete(id);
      if (this.pending.size === 0 && this.keepAlive) {
        clearInterval(this.keepAlive);
        this.keepAlive = undefined;
      }
    });
  }

  /** A reply as the error `spawn` would have thrown, for the callers that check its code. */
  static startError(reply: HelperReply): Error | undefined {
    return reply.error ? new StartError(reply.error.message, reply.error.code) : undefined;
  }

  private ensure(): ChildProcess {
    if (this.child) return this.child;
    const child = spawn(process.execPath, ['-e', `const __name = (f) => f; (${helperMain.toString()})();`], {
      stdio: ['pipe', 'pipe', 'inherit'],
      // Every host command of the node starts from the helper's environment: the essentials only
      // (common's essentialHostEnv says why), none of svc's secrets or the host's credentials.
      env: essentialHostEnv(),
    });
    this.child = child;
    child.unref();
    for (const s of [child.stdin, child.stdout]) (s as unknown as { unref?: () => void } | null)?.unref?.();
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const message = JSON.parse(line) as HelperReply | HelperOutput;
      if ('out' in message) {
        this.listeners.get(message.id)?.(message.out, message.data);
        return;
      }
      const reply = message;
      const resolve = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      resolve?.(reply);
    });
    const lost = (why: string) => {
      if (this.child !== child) return;
      this.child = undefined;
      for (const [id, resolve] of this.pending) resolve({ id, error: { message: `svc command helper ${why}` } });
      this.pending.clear();
    };
    child.on('exit', (code, signal) => lost(`exited (${signal ?? code})`));
    child.on('error', (err) => lost(`failed: ${err.message}`));
    child.stdin!.on('error', (err) => lost(`stdin failed: ${err.message}`));
    return child;
  }
}

/** The process's helper. */
export const commandHelper = new CommandHelper();
