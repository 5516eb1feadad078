/**
 * A running command or PTY seen through its event stream: output is collected and handed
 * to the callbacks as it arrives; `wait()` gives the result once the end event came.
 */
import { CommandExitError, SandboxError, type CommandResult } from './errors.ts';
import { decodeProcessEvent } from './envd/messages.ts';
import type { RpcStream } from './envd/rpc-stream.ts';
import { mapEnvdError } from './envd/transport.ts';
import type { RequestOpts } from './types.ts';

export type { CommandResult } from './errors.ts';

export interface CommandHandleHooks {
  kill: () => Promise<boolean>;
  sendStdin?: (data: string | Uint8Array, opts?: RequestOpts) => Promise<void>;
  closeStdin?: (opts?: RequestOpts) => Promise<void>;
  onStdout?: (data: string) => void | Promise<void>;
  onStderr?: (data: string) => void | Promise<void>;
  onPty?: (data: Uint8Array) => void | Promise<void>;
  /** False: stdout and stderr go to the callbacks only, not kept (CommandStartOpts.keepOutput). */
  keepOutput?: boolean;
}

export class CommandHandle {
  readonly pid: number;
  private _stdout = '';
  private _stderr = '';
  private readonly stdoutDecoder = new TextDecoder();
  private readonly stderrDecoder = new TextDecoder();
  private result?: CommandResult;
  private failure?: Error;
  private disconnected = false;
  private readonly done: Promise<void>;

  /** @internal Made by `commands.run`, `commands.connect`, `pty.create` and `pty.connect`. */
  constructor(
    pid: number,
    private readonly events: RpcStream<unknown>,
    private readonly hooks: CommandHandleHooks,
  ) {
    this.pid = pid;
    this.done = this.consume();
  }

  /** The exit code, once the command finished. */
  get exitCode(): number | undefined { return this.result?.exitCode; }
  get error(): string | undefined { return this.result?.error; }
  get stdout(): string { return this._stdout; }
  get stderr(): string { return this._stderr; }

  /** Waits for the end; a non-zero exit throws CommandExitError. */
  async wait(): Promise<CommandResult> {
    await this.done;
    if (this.failure) throw this.failure;
    if (!this.result) throw new SandboxError('the process stream ended without a result');
    if (this.result.exitCode !== 0) throw new CommandExitError(this.result);
    return this.result;
  }

  /** Stops receiving events; the command keeps running (reattach with `commands.connect`). */
  async disconnect(): Promise<void> {
    this.disconnected = true;
    this.events.close();
  }

  /** SIGKILL; false when the process was already gone. */
  async kill(): Promise<boolean> {
    return this.hooks.kill();
  }

  async sendStdin(data: string | Uint8Array, opts?: RequestOpts): Promise<void> {
    if (!this.hooks.sendStdin) throw new SandboxError('this handle cannot send stdin');
    await this.hooks.sendStdin(data, opts);
  }

  async closeStdin(opts?: RequestOpts): Promise<void> {
    if (!this.hooks.closeStdin) throw new SandboxError('this handle cannot close stdin');
    await this.hooks.closeStdin(opts);
  }

  private async consume(): Promise<void> {
    try {
      for await (const message of this.events) {
        if (this.disconnected) break;
        const ev = decodeProcessEvent(message);
        if (!ev) continue;
        switch (ev.type) {
          case 'stdout': await this.emitStdout(this.stdoutDecoder.decode(ev.data, { stream: true })); break;
          case 'stderr': await this.emitStderr(this.stderrDecoder.decode(ev.data, { stream: true })); break;
          case 'pty': await this.hooks.onPty?.(ev.data); break;
          case 'end':
            await this.flush();
            this.result = { exitCode: ev.exitCode, error: ev.error, stdout: this._stdout, stderr: this._stderr };
            break;
        }
      }
    } catch (err) {
      this.failure = mapEnvdError(err);
    } finally {
      this.events.close();
    }
    if (!this.result && !this.disconnected) await this.flush().catch(() => { /* the stream's own failure, kept above, is what wait() reports */ });
  }

  private async flush(): Promise<void> {
    await this.emitStdout(this.stdoutDecoder.decode());
    await this.emitStderr(this.stderrDecoder.decode());
  }

  private async emitStdout(text: string): Promise<void> {
    if (!text) return;
    if (this.hooks.keepOutput !== false) this._stdout += text;
    await this.hooks.onStdout?.(text);
  }

  private async emitStderr(text: string): Promise<void> {
    if (!text) return;
    if (this.hooks.keepOutput !== false) this._stderr += text;
    await this.hooks.onStderr?.(text);
  }
}
