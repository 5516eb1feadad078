/**
 * A bash context: one bash process that lives as long as the context, so variables, functions
 * and the working directory persist. Each snippet is written to a file and sourced (stdin from
 * /dev/null, so a command reading stdin cannot swallow the next snippet); a marker with the
 * snippet's exit status on stdout, and one on stderr, tell where its output ends.
 *
 * A non-zero exit status of the snippet (its last command's, as in a shell) is an error named
 * `ExitStatus` whose value is the status, the way E2B's bash kernel reports the status as the
 * error's value. An interrupt (SIGINT to the process group) ends the running command; a trap
 * returns from the sourced snippet (from the innermost function when it runs in one).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Backpressure } from './backpressure.ts';
import { environmentWith, type EnvChanges, type ExecutionEnd, type Kernel, type Log, type OutputSink } from './kernel.ts';
import { logExit, signalGroup, stopGroup } from './kernel-process.ts';

const INTERRUPT_GRACE_MS = 5_000;

/** Splits a stream at a marker that may arrive cut across chunks; what follows it is the marker's tail. */
class MarkerScanner {
  private held = '';

  constructor(private readonly marker: string) {}

  /** The text before the marker that can be passed on, and whether the marker was seen (then `rest` follows it). */
  push(chunk: string): { text: string; found: boolean; rest: string } {
    const all = this.held + chunk;
    const at = all.indexOf(this.marker);
    if (at >= 0) {
      this.held = '';
      return { text: all.slice(0, at), found: true, rest: all.slice(at + this.marker.length) };
    }
    // Hold back a tail that could be the start of the marker.
    let keep = Math.min(all.length, this.marker.length - 1);
    while (keep > 0 && !this.marker.startsWith(all.slice(all.length - keep))) keep--;
    this.held = all.slice(all.length - keep);
    return { text: all.slice(0, all.length - keep), found: false, rest: '' };
  }
}

interface Shell {
  child: ChildProcess;
  dir: string;
  alive: boolean;
  ended: Promise<void>;
  executions: number;
  onStdout: (text: string) => void;
  onStderr: (text: string) => void;
}

export class BashKernel implements Kernel {
  readonly language = 'bash' as const;
  private shell: Shell | undefined;
  private env: EnvChanges = {};

  constructor(
    readonly cwd: string,
    private readonly log: Log,
  ) {}

  async start(): Promise<void> {
    this.running();
  }

  async execute(code: string, emit: OutputSink, signal: AbortSignal): Promise<ExecutionEnd> {
    const shell = this.running();
    shell.executions += 1;
    emit({ type: 'number_of_executions', execution_count: shell.executions });
    const now = () => new Date().toISOString();
    let status = 0;
    // While the client is behind, the shell's pipes are not read: its commands block on writing.
    const pipes = [shell.child.stdout, shell.child.stderr];
    const flow = new Backpressure({ pause: () => pipes.forEach((p) => p?.pause()), resume: () => pipes.forEach((p) => p?.resume()) }, emit);
    const end = await this.runSnippet(shell, code, signal, {
      stdout: (text) => flow.send({ type: 'stdout', text, timestamp: now() }),
      stderr: (text) => flow.send({ type: 'stderr', text, timestamp: now() }),
      status: (s) => { status = s; },
    }).finally(() => flow.release());
    if (end === 'completed' && status !== 0) emit({ type: 'error', name: 'ExitStatus', value: String(status), traceback: `exit status ${status}` });
    return end;
  }

  async setEnv(changes: EnvChanges): Promise<void> {
    Object.assign(this.env, changes);
    const shell = this.shell;
    if (!shell?.alive) return; // a new process starts with them
    const script = Object.entries(changes).map(([k, v]) => (v === null ? `unset ${k}` : `export ${k}=${shellQuote(v)}`)).join('\n');
    const end = await this.runSnippet(shell, script, new AbortController().signal, { stdout: () => {}, stderr: () => {}, status: () => {} });
    if (end !== 'completed') throw new Error('the shell ended while setting the environment');
  }

  async interrupt(): Promise<void> {
    if (this.shell?.alive) signalGroup(this.shell.child, 'SIGINT');
  }

  async restart(): Promise<void> {
    await this.shutdown();
    this.running();
  }

  async shutdown(): Promise<void> {
    const shell = this.shell;
    this.shell = undefined;
    if (!shell) return;
    await stopGroup(shell.child);
    rmSync(shell.dir, { recursive: true, force: true });
  }

  private runSnippet(shell: Shell, code: string, signal: AbortSignal, out: { stdout: (t: string) => void; stderr: (t: string) => void; status: (s: number) => void }): Promise<ExecutionEnd> {
    const marker = `\u001fsvc-${randomBytes(8).toString('hex')}\u001f`;
    const file = join(shell.dir, 'snippet.sh');
    writeFileSync(file, code.endsWith('\n') ? code : `${code}\n`);
    return new Promise<ExecutionEnd>((resolve) => {
      const stdout = new MarkerScanner(marker);
      const stderr = new MarkerScanner(marker);
      let stdoutDone = false;
      let stderrDone = false;
      let statusText = '';
      let interrupted = false;
      let graceTimer: NodeJS.Timeout | undefined;
      const finish = (end: ExecutionEnd) => {
        clearTimeout(graceTimer);
        signal.removeEventListener('abort', onAbort);
        shell.onStdout = () => {};
        shell.onStderr = () => {};
        resolve(end);
      };
      const maybeDone = () => {
        if (stdoutDone && stderrDone) finish(interrupted ? 'interrupted' : 'completed');
      };
      shell.onStdout = (chunk) => {
        if (stdoutDone) {
          statusText += chunk;
        } else {
          const r = stdout.push(chunk);
          if (r.text) out.stdout(r.text);
          if (!r.found) return;
          stdoutDone = true;
          statusText = r.rest;
        }
        // The status follows the marker up to the end of its line.
        const nl = statusText.indexOf('\n');
        if (nl < 0) return;
        out.status(Number(statusText.slice(0, nl)));
        maybeDone();
      };
      shell.onStderr = (chunk) => {
        if (stderrDone) return;
        const r = stderr.push(chunk);
        if (r.text) out.stderr(r.text);
        if (r.found) {
          stderrDone = true;
          if (statusText.includes('\n')) maybeDone();
        }
      };
      void shell.ended.then(() => finish('died'));
      const onAbort = () => {
        interrupted = true;
        void this.interrupt();
        graceTimer = setTimeout(() => {
          this.log('warn', 'an interrupted bash execution did not stop; ending its shell', { pid: shell.child.pid });
          void stopGroup(shell.child);
          finish('interrupted');
        }, INTERRUPT_GRACE_MS);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      shell.child.stdin?.write(`. ${shellQuote(file)} < /dev/null; printf '%s%d\\n' ${shellQuote(marker)} "$?"; printf '%s' ${shellQuote(marker)} >&2\n`);
    });
  }

  private running(): Shell {
    if (this.shell?.alive) return this.shell;
    if (this.shell) rmSync(this.shell.dir, { recursive: true, force: true });
    const dir = mkdtempSync(join(tmpdir(), 'svc-bash-'));
    const child = spawn('bash', ['--noprofile', '--norc'], { cwd: this.cwd, env: environmentWith(this.env), detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    let markEnded: () => void = () => {};
    const shell: Shell = {
      child,
      dir,
      alive: true,
      ended: new Promise<void>((resolve) => { markEnded = resolve; }),
      executions: 0,
      onStdout: () => {},
      onStderr: () => {},
    };
    child.stdout?.setEncoding('utf8').on('data', (t: string) => shell.onStdout(t));
    child.stderr?.setEncoding('utf8').on('data', (t: string) => shell.onStderr(t));
    child.stdin?.on('error', (err) => this.log('warn', `bash kernel stdin: ${err.message}`, { pid: child.pid }));
    child.on('error', (err) => this.log('warn', `bash kernel: ${err.message}`, { pid: child.pid }));
    child.once('exit', (code, signal) => {
      shell.alive = false;
      markEnded();
      logExit(child, this.log, 'bash kernel', code, signal);
    });
    // An interrupt returns from the sourced snippet instead of ending the shell.
    child.stdin?.write("trap 'return 130 2>/dev/null' INT\n");
    this.shell = shell;
    this.log('info', 'bash kernel started', { pid: child.pid, cwd: this.cwd });
    return shell;
  }
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
