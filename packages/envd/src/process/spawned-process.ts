import { constants } from 'node:os';
import { ConnectError } from '../connect/code.ts';
import type { ProcessConfig } from '@svc/contracts/envd/process/process_pb';
import { exitInfo } from './exit-status.ts';
import { ManagedProcess, type ProcessListener } from './managed-process.ts';
import type { LaunchSpec } from './launch-spec.ts';
import { SpawnerUnavailable, type SpawnedChild, type Spawner } from './spawner.ts';

function errnoName(errno: number): string {
  return Object.entries(constants.errno).find(([, v]) => v === errno)?.[0] ?? `errno ${errno}`;
}

/** A process with plain pipes, started and relayed by envd's spawner (spawner.ts). */
export class SpawnedProcess extends ManagedProcess {
  readonly isPty = false;
  private stdinOpen: boolean;
  private stdinError: string | undefined;
  /** The process starts with its output unread; the first subscriber (its Start call) lets it flow. */
  private releaseStart: (() => void) | undefined;

  private constructor(private readonly child: SpawnedChild, config: ProcessConfig, tag: string | undefined, withStdin: boolean) {
    super(child.pid, config, tag);
    this.stdinOpen = withStdin;
    this.releaseStart = this.holdOutput();
  }

  override subscribe(listener: ProcessListener): () => void {
    const unsubscribe = super.subscribe(listener);
    const release = this.releaseStart;
    this.releaseStart = undefined;
    release?.();
    return unsubscribe;
  }

  static async start(spawner: Spawner, spec: LaunchSpec, groups: number[] | undefined, config: ProcessConfig, tag: string | undefined, withStdin: boolean): Promise<SpawnedProcess> {
    let proc: SpawnedProcess | undefined;
    const early: Array<(p: SpawnedProcess) => void> = [];
    const deliver = (f: (p: SpawnedProcess) => void) => (proc ? f(proc) : early.push(f));
    const child = await spawner.spawn(
      {
        file: spec.file,
        args: spec.args,
        cwd: spec.cwd,
        env: spec.env,
        user: spec.uid === undefined ? undefined : { uid: spec.uid, gid: spec.gid ?? spec.uid, groups: groups ?? [] },
        withStdin,
        paused: true,
      },
      {
        output: (kind, data) => deliver((p) => p.emitOutput(kind, data)),
        stdinError: (errno) => deliver((p) => { p.stdinError = errnoName(errno); }),
        exited: (code, signal) => deliver((p) => p.emitEnd(exitInfo(code, signal))),
      },
    ).catch((err: Error) => {
      if (err instanceof SpawnerUnavailable) throw err;
      throw new ConnectError('invalid_argument', `error starting process '${spec.displayCommand}': ${err.message}`);
    });
    proc = new SpawnedProcess(child, config, tag, withStdin);
    for (const f of early) f(proc);
    return proc;
  }

  writeStdin(data: Uint8Array): Promise<void> {
    if (!this.stdinOpen || !this.running) {
      return Promise.reject(new ConnectError('failed_precondition', `stdin of process ${this.pid} is not enabled or already closed`));
    }
    if (this.stdinError) {
      return Promise.reject(new ConnectError('failed_precondition', `error writing to stdin of process ${this.pid}: ${this.stdinError}`));
    }
    return this.child.writeStdin(data).catch((err: Error) => {
      throw new ConnectError('failed_precondition', `error writing to stdin of process ${this.pid}: ${this.stdinError ?? err.message}`);
    });
  }

  closeStdin(): void {
    if (!this.stdinOpen) return;
    this.stdinOpen = false;
    this.child.closeStdin();
  }

  writePty(): void {
    throw new ConnectError('failed_precondition', `process ${this.pid} has no PTY, write to its stdin instead`);
  }

  resize(): void {
    throw new ConnectError('failed_precondition', `process ${this.pid} has no PTY to resize`);
  }

  protected pauseOutput(): void {
    this.child.pause();
  }

  protected resumeOutput(): void {
    this.child.resume();
  }

  protected detachOutput(): void {
    this.child.detach();
  }
}
