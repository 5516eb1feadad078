/**
 * envd's side of svc-spawner (packages/envd/native/spawner.c, docs/decisions.md "envd's
 * spawner"): one small helper process that forks and execs envd's piped processes, because a
 * fork of envd itself costs tens of milliseconds under gVisor's ptrace platform. The frame
 * format is described in spawner.c.
 */
import { spawn, type ChildProcess } from 'node:child_process';

const enum Frame {
  Spawn = 1, Stdin = 2, StdinClose = 3, Pause = 4, Resume = 5, Detach = 6, TtyModes = 7, TtyProbe = 8,
  Started = 10, Failed = 11, Stdout = 12, Stderr = 13, Exited = 14, StdinError = 15, StdinWritten = 16,
  TtyModesReply = 17, TtyProbeReply = 18,
}

/** What a terminal's modes say about its signal keys (termios c_lflag and three of c_cc). */
export interface TtyModes {
  lflag: number;
  intr: number;
  quit: number;
  susp: number;
}

const HEADER = 9;

export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** Switch to this user, its group and exactly these supplementary groups; absent: stay root. */
  user?: { uid: number; gid: number; groups: number[] };
  withStdin: boolean;
  /** Read no output until resume(): nothing arrives before there is someone to give it to. */
  paused?: boolean;
}

/** What a spawned process reports; `exited` comes once it is reaped and its output has closed. */
export interface SpawnEvents {
  output(kind: 'stdout' | 'stderr', data: Buffer): void;
  stdinError(errno: number): void;
  exited(code: number | null, signal: number | null): void;
}

/** A process started through the spawner. */
export interface SpawnedChild {
  readonly pid: number;
  /** Resolves once the bytes are in the process's pipe (so a process that reads nothing holds the writer). */
  writeStdin(data: Uint8Array): Promise<void>;
  closeStdin(): void;
  pause(): void;
  resume(): void;
  /** Stop waiting for its output: `exited` comes as soon as it has ended. */
  detach(): void;
}

interface Pending {
  resolve(child: SpawnedChild): void;
  reject(err: Error): void;
  events: SpawnEvents;
}

export class SpawnerUnavailable extends Error {}

export class Spawner {
  private readonly pending = new Map<number, Pending>();
  private readonly live = new Map<number, SpawnEvents>();
  /** Per process, the stdin writes the helper has not yet put into its pipe, oldest first. */
  private readonly writes = new Map<number, Array<{ resolve(): void; reject(err: Error): void }>>();
  /** TTY_MODES and TTY_PROBE requests waiting for their reply. */
  private readonly queries = new Map<number, { resolve(reply: Buffer): void; reject(err: Error): void }>();
  private nextId = 1;
  private buffered = Buffer.alloc(0);
  private gone: Error | undefined;

  private constructor(
    private readonly helper: ChildProcess,
    private readonly log: (line: string) => void,
    /** The helper's program, which also starts terminals (`pty-session`, pty-signals.ts). */
    readonly path: string,
  ) {
    helper.stdout!.on('data', (chunk: Buffer) => this.receive(chunk));
    helper.stderr!.setEncoding('utf8').on('data', (text: string) => log(`envd: spawner: ${text.trimEnd()}`));
    helper.stdin!.on('error', () => { /* reported by 'exit' below */ });
    helper.on('error', (err) => this.fail(err));
    helper.on('exit', (code, signal) => this.fail(new Error(`svc-spawner exited (${signal ?? `code ${code}`})`)));
  }

  /** Starts the helper; its processes are then started by `spawn`. */
  static start(path: string, log: (line: string) => void = console.error): Spawner {
    const helper = spawn(path, [], { stdio: ['pipe', 'pipe', 'pipe'] });
    return new Spawner(helper, log, path);
  }

  /** The helper's own pid. */
  get pid(): number | undefined {
    return this.helper.pid;
  }

  /** Whether the helper still runs: when not, envd starts processes itself. */
  get available(): boolean {
    return !this.gone;
  }

  spawn(req: SpawnRequest, events: SpawnEvents): Promise<SpawnedChild> {
    if (this.gone) return Promise.reject(new SpawnerUnavailable(this.gone.message));
    const id = this.nextId++;
    // argv[0] is the file, as Node's spawn makes it.
    const strings = [req.file, req.cwd, req.file, ...req.args, ...Object.entries(req.env).map(([k, v]) => `${k}=${v}`)];
    for (const s of strings) if (s.includes('\0')) return Promise.reject(new Error('arguments and environment must not contain NUL bytes'));
    const groups = req.user?.groups ?? [];
    const fixed = Buffer.alloc(24 + groups.length * 4);
    fixed.writeInt32LE(req.user ? req.user.uid : -1, 0);
    fixed.writeInt32LE(req.user ? req.user.gid : -1, 4);
    fixed.writeUInt32LE((req.withStdin ? 1 : 0) | (req.paused ? 2 : 0), 8);
    fixed.writeUInt32LE(groups.length, 12);
    fixed.writeUInt32LE(req.args.length + 1, 16);
    fixed.writeUInt32LE(Object.keys(req.env).length, 20);
    groups.forEach((g, i) => fixed.writeUInt32LE(g, 24 + i * 4));
    const payload = Buffer.concat([fixed, Buffer.from(strings.map((s) => `${s}\0`).join(''))]);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, events });
      this.send(Frame.Spawn, id, payload);
    });
  }

  /** The modes of the terminal at `path` (/dev/pts/N). */
  async ttyModes(path: string): Promise<TtyModes> {
    if (path.includes('\0')) throw new Error('a terminal path must not contain NUL bytes');
    const reply = await this.query(Frame.TtyModes, Buffer.from(`${path}\0`));
    const errno = reply.readInt32LE(0);
    if (errno) throw Object.assign(new Error(`reading the modes of ${path}: errno ${errno}`), { errno });
    return { lflag: reply.readUInt32LE(4), intr: reply[8], quit: reply[9], susp: reply[10] };
  }

  /** Whether the kernel turns ^C typed into a terminal into SIGINT (false under older gVisor). */
  async kernelSignalsTtyKeys(): Promise<boolean> {
    const result = (await this.query(Frame.TtyProbe)).readInt32LE(0);
    if (result < 0) throw Object.assign(new Error(`probing terminal signals: errno ${-result}`), { errno: -result });
    return result === 1;
  }

  private query(type: Frame, payload?: Uint8Array): Promise<Buffer> {
    if (this.gone) return Promise.reject(new SpawnerUnavailable(this.gone.message));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.queries.set(id, { resolve, reject });
      this.send(type, id, payload);
    });
  }

  /** Ends the helper (envd is stopping); processes it started keep running. */
  close(): void {
    this.helper.stdin!.end();
  }

  private child(id: number, pid: number): SpawnedChild {
    return {
      pid,
      writeStdin: (data) => {
        if (!data.byteLength) return Promise.resolve();
        if (this.gone || !this.live.has(id)) return Promise.reject(new Error('the process has ended'));
        return new Promise((resolve, reject) => {
          const queue = this.writes.get(id) ?? [];
          queue.push({ resolve, reject });
          this.writes.set(id, queue);
          this.send(Frame.Stdin, id, data);
        });
      },
      closeStdin: () => this.send(Frame.StdinClose, id),
      pause: () => this.send(Frame.Pause, id),
      resume: () => this.send(Frame.Resume, id),
      detach: () => this.send(Frame.Detach, id),
    };
  }

  private send(type: Frame, id: number, payload: Uint8Array = new Uint8Array(0)): void {
    if (this.gone) return;
    const head = Buffer.alloc(HEADER);
    head.writeUInt32LE(payload.byteLength, 0);
    head.writeUInt8(type, 4);
    head.writeUInt32LE(id, 5);
    this.helper.stdin!.write(payload.byteLength ? Buffer.concat([head, payload]) : head);
  }

  private receive(chunk: Buffer): void {
    let buf = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    while (buf.length >= HEADER) {
      const len = buf.readUInt32LE(0);
      if (buf.length < HEADER + len) break;
      this.handle(buf.readUInt8(4), buf.readUInt32LE(5), buf.subarray(HEADER, HEADER + len));
      buf = buf.subarray(HEADER + len);
    }
    // Keep only the unfinished frame, copied so the chunk it came in can be freed.
    this.buffered = buf.length ? Buffer.from(buf) : Buffer.alloc(0);
  }

  private handle(type: number, id: number, payload: Buffer): void {
    if (type === Frame.TtyModesReply || type === Frame.TtyProbeReply) {
      const q = this.queries.get(id);
      this.queries.delete(id);
      q?.resolve(Buffer.from(payload));
      return;
    }
    if (type === Frame.Started || type === Frame.Failed) {
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (type === Frame.Started) {
        this.live.set(id, p.events);
        p.resolve(this.child(id, payload.readInt32LE(0)));
      } else {
        p.reject(Object.assign(new Error(payload.subarray(4).toString()), { errno: payload.readInt32LE(0) }));
      }
      return;
    }
    const events = this.live.get(id);
    if (!events) return;
    if (type === Frame.Stdout) events.output('stdout', Buffer.from(payload));
    else if (type === Frame.Stderr) events.output('stderr', Buffer.from(payload));
    else if (type === Frame.StdinWritten) this.writes.get(id)?.shift()?.resolve();
    else if (type === Frame.StdinError) {
      const errno = payload.readInt32LE(0);
      this.failWrites(id, new Error(`stdin: errno ${errno}`));
      events.stdinError(errno);
    } else if (type === Frame.Exited) {
      this.live.delete(id);
      this.failWrites(id, new Error('the process has ended'));
      const status = payload.readInt32LE(0);
      // A wait status: the low 7 bits name a terminating signal, else the exit code is above them.
      const signal = status & 0x7f;
      events.exited(signal ? null : (status >> 8) & 0xff, signal || null);
    }
  }

  private failWrites(id: number, err: Error): void {
    for (const w of this.writes.get(id) ?? []) w.reject(err);
    this.writes.delete(id);
  }

  /** The helper is gone: pending starts fail, and processes it relayed end with their output lost. */
  private fail(err: Error): void {
    if (this.gone) return;
    this.gone = err;
    this.log(`envd: ${err.message}; processes start without it from now on`);
    for (const p of this.pending.values()) p.reject(new SpawnerUnavailable(err.message));
    this.pending.clear();
    for (const q of this.queries.values()) q.reject(new SpawnerUnavailable(err.message));
    this.queries.clear();
    for (const [id, events] of this.live) {
      this.failWrites(id, err);
      events.exited(null, null);
    }
    this.live.clear();
  }
}
