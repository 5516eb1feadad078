import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { ConnectError } from '../connect/code.ts';
import type { ProcessConfig } from '@svc/contracts/envd/process/process_pb';
import { exitInfo } from './exit-status.ts';
import { ManagedProcess } from './managed-process.ts';
import type { LaunchSpec } from './launch-spec.ts';

/** A process with plain pipes for stdout/stderr and, when asked, stdin. */
export class PipedProcess extends ManagedProcess {
  readonly isPty = false;
  private stdin: Writable | undefined;
  private stdinError: Error | undefined;

  private constructor(
    private readonly child: ChildProcess,
    config: ProcessConfig,
    tag: string | undefined,
  ) {
    super(child.pid!, config, tag);
    child.on('error', () => {}); // e.g. a failed kill; the exit is reported by 'close'
    this.stdin = child.stdin ?? undefined;
    this.stdin?.on('error', (err) => {
      this.stdinError = err;
    });
    this.forward(child.stdout!, 'stdout');
    this.forward(child.stderr!, 'stderr');
    child.on('close', (code, signal) => this.emitEnd(exitInfo(code, signal)));
  }

  static start(spec: LaunchSpec, config: ProcessConfig, tag: string | undefined, withStdin: boolean): Promise<PipedProcess> {
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      uid: spec.uid,
      gid: spec.gid,
      stdio: [withStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      // Own session: a `kill 0` in user code must not reach envd.
      detached: true,
    });
    if (child.pid !== undefined) return Promise.resolve(new PipedProcess(child, config, tag));
    return new Promise((_, reject) => {
      child.once('error', (err) => reject(new ConnectError('invalid_argument', `error starting process '${spec.displayCommand}': ${err.message}`)));
    });
  }

  private forward(stream: Readable, kind: 'stdout' | 'stderr'): void {
    stream.on('data', (chunk: Buffer) => this.emitOutput(kind, chunk));
    stream.on('error', () => {});
  }

  writeStdin(data: Uint8Array): Promise<void> {
    const stdin = this.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      return Promise.reject(new ConnectError('failed_precondition', `stdin of process ${this.pid} is not enabled or already closed`));
    }
    if (this.stdinError) {
      return Promise.reject(new ConnectError('failed_precondition', `error writing to stdin of process ${this.pid}: ${this.stdinError.message}`));
    }
    return new Promise((resolve, reject) => {
      stdin.write(data, (err) => {
        if (err) reject(new ConnectError('failed_precondition', `error writing to stdin of process ${this.pid}: ${err.message}`));
        else resolve();
      });
    });
  }

  closeStdin(): void {
    this.stdin?.end();
    this.stdin = undefined;
  }

  writePty(): void {
    throw new ConnectError('failed_precondition', `process ${this.pid} has no PTY, write to its stdin instead`);
  }

  resize(): void {
    throw new ConnectError('failed_precondition', `process ${this.pid} has no PTY to resize`);
  }

  protected pauseOutput(): void {
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  protected resumeOutput(): void {
    this.child.stdout?.resume();
    this.child.stderr?.resume();
  }

  protected detachOutput(): void {
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
  }
}
