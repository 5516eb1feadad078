/**
 * `sandbox.pty`: interactive terminals, which are processes started with a PTY attached.
 */
import type { CommandHandle } from './command-handle.ts';
import { DEFAULT_COMMAND_TIMEOUT_MS, killProcess } from './commands.ts';
import { PROCESS, toBase64, type StartRequestJson } from './envd/messages.ts';
import { EnvdTransport, mapEnvdError, userHeader } from './envd/transport.ts';
import { handleFromStream } from './process-start.ts';
import type { PtyConnectOpts, PtyCreateOpts, RequestOpts } from './types.ts';

export class Pty {
  constructor(private readonly transport: EnvdTransport) {}

  /** Starts an interactive login bash on a new terminal of `cols` × `rows`. */
  async create(opts: PtyCreateOpts): Promise<CommandHandle> {
    const envs = { TERM: 'xterm-256color', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', ...opts.envs };
    const request: StartRequestJson = {
      process: { cmd: '/bin/bash', args: ['-i', '-l'], envs, cwd: opts.cwd },
      pty: { size: { cols: opts.cols, rows: opts.rows } },
    };
    const stream = this.transport.stream<unknown>(`${PROCESS}/Start`, request, {
      headers: userHeader(opts.user),
      timeoutMs: opts.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      requestTimeoutMs: opts.requestTimeoutMs,
      signal: opts.signal,
    });
    return handleFromStream(stream, (pid) => ({ kill: () => this.kill(pid), onPty: opts.onData }));
  }

  async connect(pid: number, opts: PtyConnectOpts): Promise<CommandHandle> {
    const stream = this.transport.stream<unknown>(`${PROCESS}/Connect`, { process: { pid } }, {
      timeoutMs: opts.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS,
      requestTimeoutMs: opts.requestTimeoutMs,
      signal: opts.signal,
    });
    return handleFromStream(stream, (id) => ({ kill: () => this.kill(id), onPty: opts.onData }));
  }

  async sendInput(pid: number, data: Uint8Array, opts: RequestOpts = {}): Promise<void> {
    try {
      await this.transport.unary(`${PROCESS}/SendInput`, { process: { pid }, input: { pty: toBase64(data) } }, opts);
    } catch (err) {
      throw mapEnvdError(err);
    }
  }

  async resize(pid: number, size: { cols: number; rows: number }, opts: RequestOpts = {}): Promise<void> {
    try {
      await this.transport.unary(`${PROCESS}/Update`, { process: { pid }, pty: { size } }, opts);
    } catch (err) {
      throw mapEnvdError(err);
    }
  }

  /** SIGKILL; false when no such terminal exists. */
  async kill(pid: number, opts: RequestOpts = {}): Promise<boolean> {
    return killProcess(this.transport, pid, opts);
  }
}
