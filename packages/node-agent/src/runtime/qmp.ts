/**
 * A client of QEMU's machine protocol (QMP) for the microvm driver (issue 14; ARCHITECTURE.md
 * "Runtimes"): newline-delimited JSON over a Unix socket. The greeting is read, capabilities are
 * negotiated, then each command carries an id and is answered by `return` or `error` with that
 * id; events (`{event, data, timestamp}`) arrive between answers. Every call has a deadline, and a
 * QEMU that dies or hangs fails the calls waiting on it instead of blocking the node agent.
 */
import { connect, type Socket } from 'node:net';

export interface QmpEvent {
  event: string;
  data?: Record<string, unknown>;
  timestamp?: { seconds: number; microseconds: number };
}

export class QmpError extends Error {
  constructor(message: string, readonly qmpClass?: string) {
    super(message);
    this.name = 'QmpError';
  }
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
  command: string;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** A line longer than this is not QMP: the connection is dropped (a misbehaving peer cannot grow memory). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;

export class QmpClient {
  private buffer = '';
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private readonly listeners = new Set<(e: QmpEvent) => void>();
  private closedWith?: Error;
  /** waitForEvent calls to fail when the connection ends. */
  private readonly closeWaiters = new Set<(err: Error) => void>();

  private constructor(private readonly socket: Socket, private readonly defaultTimeoutMs: number) {
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => this.onData(chunk));
    socket.resume();
    socket.on('error', (err) => this.fail(new QmpError(`QMP connection failed: ${err.message}`)));
    socket.on('close', () => this.fail(new QmpError('QMP connection closed (QEMU exited?)')));
  }

  /**
   * Connects to QEMU's `-qmp unix:PATH,server=on,wait=off` socket, reads the greeting and
   * negotiates capabilities, all within `timeoutMs`.
   */
  static async connect(path: string, opts: { timeoutMs?: number } = {}): Promise<QmpClient> {
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const socket = connect(path);
    let rest = '';
    const greeting = new Promise<void>((resolve, reject) => {
      let text = '';
      const timer = setTimeout(() => { socket.destroy(); reject(new QmpError(`QMP at ${path}: no greeting within ${timeoutMs} ms`)); }, timeoutMs);
      const onData = (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const nl = text.indexOf('\n');
        if (nl < 0) return;
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', onError);
        try {
          const msg = JSON.parse(text.slice(0, nl)) as { QMP?: unknown };
          if (!msg.QMP) throw new Error('not a QMP greeting');
        } catch (err) {
          socket.destroy();
          reject(new QmpError(`QMP at ${path}: ${(err as Error).message}: ${text.slice(0, 200)}`));
          return;
        }
        // Anything after the greeting's line belongs to the client proper.
        socket.pause();
        rest = text.slice(nl + 1);
        resolve();
      };
      const onError = (err: Error) => { clearTimeout(timer); reject(new QmpError(`QMP at ${path}: ${err.message}`)); };
      socket.on('data', onData);
      socket.once('error', onError);
    });
    await greeting;
    const client = new QmpClient(socket, timeoutMs);
    const negotiated = client.execute('qmp_capabilities', undefined, timeoutMs);
    if (rest) client.onData(rest);
    await negotiated;
    return client;
  }

  /** Runs a command; its `return` value, or a QmpError (QEMU's `error`, the deadline, a dead QEMU). */
  execute<T = unknown>(command: string, args?: Record<string, unknown>, timeoutMs = this.defaultTimeoutMs): Promise<T> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = `svc-${this.nextId++}`;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new QmpError(`QMP ${command}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer, command });
      this.socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`);
    });
  }

  /** Calls `fn` for every event until the returned function is called. */
  onEvent(fn: (e: QmpEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The first event named `name` (and passing `match`), within `timeoutMs`. */
  waitForEvent(name: string, timeoutMs = this.defaultTimeoutMs, match: (e: QmpEvent) => boolean = () => true): Promise<QmpEvent> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      const done = () => { clearTimeout(timer); off(); this.closeWaiters.delete(onClose); };
      const onClose = (err: Error) => { done(); reject(err); };
      const timer = setTimeout(() => { done(); reject(new QmpError(`QMP: no ${name} event within ${timeoutMs} ms`)); }, timeoutMs);
      const off = this.onEvent((e) => {
        if (e.event !== name || !match(e)) return;
        done();
        resolve(e);
      });
      this.closeWaiters.add(onClose);
    });
  }

  close(): void {
    this.fail(new QmpError('QMP client closed'));
    this.socket.destroy();
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    if (this.buffer.length > MAX_LINE_BYTES && !this.buffer.includes('\n')) {
      this.fail(new QmpError(`QMP: a line of more than ${MAX_LINE_BYTES} bytes`));
      this.socket.destroy();
      return;
    }
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line) this.onMessage(line);
    }
  }

  private onMessage(line: string): void {
    let msg: { id?: string; return?: unknown; error?: { class?: string; desc?: string }; event?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      this.fail(new QmpError(`QMP: not JSON: ${line.slice(0, 200)}`));
      this.socket.destroy();
      return;
    }
    if (typeof msg.event === 'string') {
      for (const fn of [...this.listeners]) fn(msg as QmpEvent);
      return;
    }
    const p = msg.id === undefined ? undefined : this.pending.get(String(msg.id));
    if (!p) return;
    this.pending.delete(String(msg.id));
    clearTimeout(p.timer);
    if (msg.error) p.reject(new QmpError(`QMP ${p.command}: ${msg.error.desc ?? 'failed'}`, msg.error.class));
    else p.resolve(msg.return);
  }

  /** Every call waiting fails with `err`; later calls fail at once. */
  private fail(err: Error): void {
    if (this.closedWith) return;
    this.closedWith = err;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    for (const w of this.closeWaiters) w(err);
    this.closeWaiters.clear();
    this.listeners.clear();
  }
}
