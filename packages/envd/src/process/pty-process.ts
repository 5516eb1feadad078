import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { IPty } from '@lydell/node-pty';
import { ConnectError } from '../connect/code.ts';
import type { ProcessConfig } from '@svc/contracts/envd/process/process_pb';
import { exitInfo } from './exit-status.ts';
import type { LaunchSpec } from './launch-spec.ts';
import { ManagedProcess } from './managed-process.ts';
import type { TerminalKeys, TtyKeySignals } from './pty-signals.ts';

type NodePty = typeof import('@lydell/node-pty');
let nodePty: NodePty | undefined;

/**
 * node-pty is a native addon that stays outside the bundle; it is resolved relative to the
 * running file (the bundle next to /.svc/node_modules, or the source tree), and only when the
 * first terminal is opened so that start-up does not pay for it.
 */
function loadNodePty(): NodePty {
  if (!nodePty) {
    try {
      nodePty = createRequire(import.meta.url)('@lydell/node-pty') as NodePty;
    } catch (err) {
      throw new ConnectError('unavailable', `terminals are not available in this sandbox: ${(err as Error).message}`);
    }
  }
  return nodePty;
}

/** A process attached to a pseudo-terminal; its output arrives as `pty` data. */
export class PtyProcess extends ManagedProcess {
  readonly isPty = true;
  private held = false;
  private destroyWhenReleased: (() => void) | undefined;
  /** Where the kernel does not turn ^C, ^\ and ^Z into signals, envd does (pty-signals.ts). */
  private readonly keys: TerminalKeys | undefined;
  /** The last input written: each waits for the one before, so none overtakes another. */
  private input: Promise<void> = Promise.resolve();

  private constructor(
    private readonly term: IPty,
    config: ProcessConfig,
    tag: string | undefined,
    keySignals: TtyKeySignals | undefined,
  ) {
    super(term.pid, config, tag);
    const ptsName = (term as unknown as { ptsName?: string }).ptsName;
    // Only a node-pty other than the one in package-lock.json lacks it; the keys then go in as typed.
    if (keySignals && ptsName) this.keys = keySignals.forTerminal(ptsName, term.pid, (data) => this.emitOutput('pty', data));
    // A second 'error' listener keeps node-pty from throwing on terminal I/O errors.
    (term as unknown as { on(event: 'error', listener: () => void): void }).on('error', () => {});
    term.onData((data) => this.emitOutput('pty', typeof data === 'string' ? Buffer.from(data) : (data as Buffer)));
    term.onExit(({ exitCode, signal }) => this.emitEnd(exitInfo(signal ? null : exitCode, signal || null)));
    this.keepUnreadOutputWhileHeld();
  }

  /**
   * node-pty reports the exit once the terminal's read side closes, or 200 ms after the process
   * exits, when it destroys the terminal (a grandchild may hold it open). While a slow client
   * holds the output, nothing is read, so that destroy would drop what the process wrote last.
   * Here it waits for the hold to end; then node-pty's 200 ms apply to reading again.
   */
  private keepUnreadOutputWhileHeld(): void {
    const socket = (this.term as unknown as { _socket?: Socket })._socket;
    // Only a node-pty other than the one in package-lock.json lacks it; pty-process.test.ts then
    // fails. Throwing here would leave the terminal's process running with no owner.
    if (!socket) return;
    const destroy = socket.destroy.bind(socket);
    socket.destroy = (...args: Parameters<Socket['destroy']>) => {
      if (!this.held || args[0]) return destroy(...args);
      this.destroyWhenReleased = () => setTimeout(() => socket.destroy(), 200);
      return socket;
    };
  }

  /** `keySignals` when the spec execs through `pty-session` (TtyKeySignals.sessionExec). */
  static start(spec: LaunchSpec, config: ProcessConfig, tag: string | undefined, cols: number, rows: number, keySignals?: TtyKeySignals): PtyProcess {
    const pty = loadNodePty();
    let term: IPty;
    try {
      term = pty.spawn(spec.file, spec.args, {
        name: spec.env.TERM ?? 'xterm-256color',
        cols: cols || 80,
        rows: rows || 24,
        cwd: spec.cwd,
        env: spec.env,
        uid: spec.uid,
        gid: spec.gid,
        encoding: null,
      });
    } catch (err) {
      throw new ConnectError('invalid_argument', `error starting pty with command '${spec.displayCommand}' in '${spec.cwd}' (${cols}x${rows}): ${(err as Error).message}`);
    }
    return new PtyProcess(term, config, tag, keySignals);
  }

  writeStdin(): Promise<void> {
    return Promise.reject(new ConnectError('failed_precondition', `process ${this.pid} has a PTY, write to the PTY instead of stdin`));
  }

  closeStdin(): void {
    throw new ConnectError('failed_precondition', `process ${this.pid} has a PTY; send Ctrl+D (0x04) to signal end of input`);
  }

  writePty(data: Uint8Array): void | Promise<void> {
    const write = (bytes: Buffer) => (this.term.write as (data: string | Buffer) => void)(bytes);
    if (!this.keys) return write(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    const keys = this.keys;
    // A copy: the request's bytes may be reused while this waits for the input before it.
    const bytes = Buffer.from(data);
    const written = this.input.then(() => keys.write(bytes, write));
    this.input = written.catch(() => {
      // The next input waits for this one whether it failed or not; this one's caller hears of it.
    });
    return written;
  }

  resize(cols: number, rows: number): void {
    if (!cols || !rows) throw new ConnectError('invalid_argument', `invalid terminal size ${cols}x${rows}`);
    this.term.resize(cols, rows);
  }

  protected pauseOutput(): void {
    this.held = true;
    this.term.pause();
  }

  protected resumeOutput(): void {
    this.held = false;
    this.term.resume();
    const destroyLater = this.destroyWhenReleased;
    this.destroyWhenReleased = undefined;
    destroyLater?.();
  }

  protected detachOutput(): void {
    // The terminal closes with its process; nothing else holds it open.
  }
}
