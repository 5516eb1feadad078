/**
 * `sandbox.commands`: start, list, attach to and signal processes through envd's
 * process.Process service.
 */
import type { CommandHandle, CommandResult } from './command-handle.ts';
import { ConnectError } from './errors.ts';
import { PROCESS, SIGKILL, decodeProcessInfo, toBase64, type StartRequestJson } from './envd/messages.ts';
import { EnvdTransport, mapEnvdError, userHeader } from './envd/transport.ts';
import { handleFromStream } from './process-start.ts';
import type { CommandConnectOpts, CommandStartOpts, ProcessInfo, RequestOpts } from './types.ts';

export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;

export class Commands {
  constructor(private readonly transport: EnvdTransport) {}

  /** Running commands and PTY sessions. */
  async list(opts: RequestOpts = {}): Promise<ProcessInfo[]> {
    try {
      const res = await this.transport.unary<{ processes?: unknown[] }>(`${PROCESS}/List`, {}, opts);
      return (res.processes ?? []).map(decodeProcessInfo);
    } catch (err) {
      throw mapEnvdError(err);
    }
  }

  async sendStdin(pid: number, data: string | Uint8Array, opts: RequestOpts = {}): Promise<void> {
    try {
      await this.transport.unary(`${PROCESS}/SendInput`, { process: { pid }, input: { stdin: toBase64(data) } }, opts);
    } catch (err) {
      throw mapEnvdError(err);
    }
  }

  /** Sends EOF to the command's stdin (it must have been started with `stdin: true`). */
  async closeStdin(pid: number, opts: RequestOpts = {}): Promise<void> {
    try {
      await this.transport.unary(`${PROCESS}/CloseStdin`, { process: { pid } }, opts);
    } catch (err) {
      throw mapEnvdError(err);
    }
  }

  /** SIGKILL; false when no such process exists. */
  async kill(pid: number, opts: RequestOpts = {}): Promise<boolean> {
    return killProcess(this.transport, pid, opts);
  }

  /** Attaches to a running command; its earlier output is not replayed. */
  async connect(pid: number, opts: CommandConnectOpts = {}): Promise<CommandHandle> {
    const stream = this.transport.stream<unknown>(`${PROCESS}/Connect`, { process: { pid } }, {
      timeoutMs: opts.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      requestTimeoutMs: opts.requestTimeoutMs,
      signal: opts.signal,
    });
    return handleFromStream(stream, (id) => ({
      kill: () => this.kill(id),
      sendStdin: (data, o) => this.sendStdin(id, data, o),
      closeStdin: (o) => this.closeStdin(id, o),
      onStdout: opts.onStdout,
      onStderr: opts.onStderr,
      keepOutput: opts.keepOutput,
    }));
  }

  /** Runs `cmd` with `bash -l -c` and waits for it; a non-zero exit throws CommandExitError. */
  run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<CommandResult>;
  /** Starts `cmd` in the background and returns its handle. */
  run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandHandle | CommandResult>;
  async run(cmd: string, opts: CommandStartOpts = {}): Promise<CommandHandle | CommandResult> {
    const handle = await this.start(cmd, opts);
    return opts.background ? handle : handle.wait();
  }

  private async start(cmd: string, opts: CommandStartOpts): Promise<CommandHandle> {
    const request: StartRequestJson = {
      process: { cmd: '/bin/bash', args: ['-l', '-c', cmd], envs: opts.envs, cwd: opts.cwd },
      stdin: opts.stdin ?? false,
    };
    const stream = this.transport.stream<unknown>(`${PROCESS}/Start`, request, {
      headers: userHeader(opts.user),
      timeoutMs: opts.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      requestTimeoutMs: opts.requestTimeoutMs,
      signal: opts.signal,
    });
    return handleFromStream(stream, (pid) => ({
      kill: () => this.kill(pid),
      sendStdin: (data, o) => this.sendStdin(pid, data, o),
      closeStdin: (o) => this.closeStdin(pid, o),
      onStdout: opts.onStdout,
      onStderr: opts.onStderr,
      keepOutput: opts.keepOutput,
    }));
  }
}

export async function killProcess(transport: EnvdTransport, pid: number, opts: RequestOpts): Promise<boolean> {
  try {
    await transport.unary(`${PROCESS}/SendSignal`, { process: { pid }, signal: SIGKILL }, opts);
    return true;
  } catch (err) {
    if (err instanceof ConnectError && err.connectCode === 'not_found') return false;
    throw mapEnvdError(err);
  }
}
