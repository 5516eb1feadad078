import { readdir, readFile } from 'node:fs/promises';
import type { Spawner, TtyModes } from './spawner.ts';

/**
 * ^C, ^\ and ^Z in terminals whose kernel does not turn them into signals.
 *
 * Linux's line discipline sends SIGINT, SIGQUIT or SIGTSTP to a terminal's foreground process
 * group when its key is typed while ISIG is on, and drops the byte. gVisor did not before its
 * 2023-02 releases (Debian's runsc 0.0~20221219 among them): the byte reaches the reader and no
 * one is signalled, so ^C does not stop a running `sleep 30`. The spawner asks the kernel once;
 * where it does not, envd plays that part of the line discipline:
 * - a terminal starts as `svc-spawner pty-session <command>`, which forks a relay inside the
 *   terminal's session (only a member may ask the terminal for its foreground group) and then
 *   execs the command, which stays the session leader;
 * - input with a control byte in it waits for the terminal's modes (the spawner reads them); a
 *   byte that is the intr, quit or susp key while ISIG is on is not written: the relay gets the
 *   signal and sends it on to the foreground group, and the key is echoed as ^C (ECHO, ECHOCTL).
 * Not played: the flush of input typed ahead of the key, for which that gVisor has no call.
 */
export class TtyKeySignals {
  private kernelDoesIt: Promise<boolean> | undefined;

  constructor(
    private readonly spawner: Spawner,
    private readonly log: (line: string) => void = console.error,
  ) {}

  /** Whether terminals need the relay; the kernel is asked at the first terminal. */
  async needed(): Promise<boolean> {
    if (!this.spawner.available) return false;
    this.kernelDoesIt ??= this.spawner.kernelSignalsTtyKeys().catch((err: Error) => {
      this.log(`envd: cannot tell whether the kernel handles ^C in terminals (${err.message}); leaving it to the kernel`);
      return true;
    });
    return !(await this.kernelDoesIt);
  }

  /** How to exec `file` so that its terminal gets the relay. */
  sessionExec(file: string, args: string[]): { file: string; args: string[] } {
    return { file: this.spawner.path, args: ['pty-session', file, ...args] };
  }

  /** The input side of one terminal: `ptsName` its /dev/pts path, `leader` the pid it started with. */
  forTerminal(ptsName: string, leader: number, echo: (data: Buffer) => void): TerminalKeys {
    return new TerminalKeys(this.spawner, ptsName, leader, echo, this.log);
  }
}

// termios c_lflag bits (asm-generic/termbits.h).
const ISIG = 0o1;
const ECHO = 0o10;
const ECHOCTL = 0o1000;
/** c_cc's value for a key that is switched off. */
const POSIX_VDISABLE = 0;
const RELAY_NAME = 'svc-pty-signals';

/** Control bytes that may be a signal key (any of them can be, by `stty intr`), not TAB, LF, CR or ESC. */
function mayBeKey(byte: number): boolean {
  return byte < 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d && byte !== 0x1b;
}

function keySignal(byte: number, modes: TtyModes): 'SIGINT' | 'SIGQUIT' | 'SIGTSTP' | undefined {
  if (byte === POSIX_VDISABLE) return undefined;
  if (byte === modes.intr) return 'SIGINT';
  if (byte === modes.quit) return 'SIGQUIT';
  if (byte === modes.susp) return 'SIGTSTP';
  return undefined;
}

export class TerminalKeys {
  private relay: number | undefined;

  constructor(
    private readonly spawner: Spawner,
    private readonly ptsName: string,
    private readonly leader: number,
    private readonly echo: (data: Buffer) => void,
    private readonly log: (line: string) => void,
  ) {}

  /** Writes typed input through `write`, turning signal keys into signals on the way. */
  async write(data: Buffer, write: (data: Buffer) => void): Promise<void> {
    if (!data.some(mayBeKey)) return write(data);
    let modes: TtyModes;
    try {
      modes = await this.spawner.ttyModes(this.ptsName);
    } catch (err) {
      this.log(`envd: terminal ${this.ptsName}: ${(err as Error).message}; its keys go in as typed`);
      return write(data);
    }
    if (!(modes.lflag & ISIG)) return write(data);
    let from = 0;
    for (let i = 0; i < data.length; i++) {
      const signal = keySignal(data[i], modes);
      if (!signal) continue;
      if (i > from) write(data.subarray(from, i));
      from = i + 1;
      if (!(await this.signal(signal))) {
        write(data.subarray(i, i + 1));
        continue;
      }
      if (modes.lflag & ECHO && modes.lflag & ECHOCTL) this.echo(Buffer.from([0x5e, data[i] ^ 0x40]));
    }
    if (from < data.length) write(data.subarray(from));
  }

  /** Has the relay send `signal` to the foreground group; false when there is no relay to ask. */
  private async signal(signal: 'SIGINT' | 'SIGQUIT' | 'SIGTSTP'): Promise<boolean> {
    this.relay ??= await this.findRelay();
    if (this.relay === undefined) {
      this.log(`envd: terminal ${this.ptsName} has no ${RELAY_NAME} process; ${signal} goes in as its key`);
      return false;
    }
    try {
      process.kill(this.relay, signal);
      return true;
    } catch (err) {
      this.log(`envd: terminal ${this.ptsName}: signalling ${RELAY_NAME} ${this.relay}: ${(err as Error).message}`);
      this.relay = undefined;
      return false;
    }
  }

  /** The relay is the leader's child named svc-pty-signals (native/spawner.c, pty_session). */
  private async findRelay(): Promise<number | undefined> {
    for (const entry of await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      } catch (err) {
        // A process that ended while the list was read is not the relay of a live terminal.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ESRCH') continue;
        throw err;
      }
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ')'.
      const end = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, end);
      const ppid = Number(stat.slice(end + 2).split(' ')[1]);
      if (comm === RELAY_NAME && ppid === this.leader) return Number(entry);
    }
    return undefined;
  }
}
