import type { Socket } from 'node:net';
import { changedByLatin1, InvalidHeaderError } from './request-head.ts';
import { ResponseParser, type ResponseEvents } from './response-parser.ts';
import { IdleGroups } from './idle-groups.ts';
import { IdleTimer } from './socket-quiet.ts';

/** Where one exchange's response goes. */
export interface ResponseSink extends ResponseEvents {
  /** The connection failed; `responseStarted`: some of the response had arrived already. */
  onFailure(err: UpstreamConnectionError, responseStarted: boolean): void;
}

/**
 * A failure of an upstream connection: the socket's own error, or `ETIMEDOUT` with `timeout`
 * saying which limit ran out (the connect, including TLS; or the idle time during an exchange).
 */
export type UpstreamConnectionError = NodeJS.ErrnoException & { timeout?: 'connect' | 'io'; timeoutMs?: number };

/** A socket on its way to an upstream, and the event that says it can carry a request. */
export interface DialedSocket {
  socket: Socket;
  /** 'connect' for TCP, 'secureConnect' for TLS, 'now' for a socket connected already (a proxy's tunnel). */
  ready: 'connect' | 'secureConnect' | 'now';
}

/**
 * Opens a new connection: at once (a plain connect or TLS) or later (through a SOCKS5 or
 * CONNECT proxy first). A rejection fails the exchange with that error.
 */
export type Dial = () => DialedSocket | Promise<DialedSocket>;

const timeoutError = (which: 'connect' | 'io', timeoutMs: number): UpstreamConnectionError =>
  Object.assign(new Error(which === 'connect' ? 'connect timeout' : 'upstream idle timeout'), { code: 'ETIMEDOUT', timeout: which, timeoutMs });

/**
 * One keep-alive HTTP/1.1 connection to an upstream, carrying one exchange at a time. The
 * request head is written in a single write; the response is parsed by ResponseParser. Until an
 * asynchronous dial has produced the socket, what the exchange writes waits in order.
 */
export class UpstreamConnection implements ResponseEvents {
  private socket: Socket | undefined;
  /** Writes made before the socket existed (an asynchronous dial), sent in order when it does. */
  private queued: Array<Buffer | string> | undefined;
  /** Served an exchange before this one (a stale keep-alive socket is then a retryable failure). */
  reused = false;
  private connected = false;
  private readonly whenConnected: Array<() => void> = [];
  private sink: ResponseSink | undefined;
  private readonly parser = new ResponseParser(this);
  private bodySent = true;
  private responseDone = true;
  private keepAlive = false;
  private connectTimer: NodeJS.Timeout | undefined;
  private finished = false;
  private destroyed = false;
  /** The pool's shorter limit while connected; onTimeout holds it to the one that applies. */
  private idle: IdleTimer | undefined;

  constructor(readonly key: string, dial: Dial, private readonly pool: UpstreamPool) {
    let dialed: DialedSocket | Promise<DialedSocket>;
    try {
      dialed = dial();
    } catch (err) {
      dialed = Promise.reject(err);
    }
    if (dialed instanceof Promise) {
      this.queued = [];
      dialed.then((d) => this.attach(d), (err: UpstreamConnectionError) => {
        this.queued = undefined;
        this.pool.forget(this);
        this.fail(err);
      });
    } else {
      this.attach(dialed);
    }
  }

  get isConnected() { return this.connected; }
  /** Closed or failed: it can carry nothing more. */
  get isDestroyed() { return this.destroyed || this.socket?.destroyed === true; }

  private attach(d: DialedSocket): void {
    const socket = d.socket;
    if (this.destroyed) { socket.destroy(); return; }
    if (socket.destroyed) {
      // Closed before it was handed over (a proxy's tunnel torn down at once): its events are past.
      this.queued = undefined;
      this.fail(Object.assign(new Error('the upstream connection closed before it was used'), { code: 'ECONNRESET' }));
      return;
    }
    this.socket = socket;
    this.idle = new IdleTimer(socket);
    socket.setNoDelay(true);
    if (d.ready !== 'now') socket.on(d.ready, this.onConnect);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('timeout', this.onTimeout);
    const queued = this.queued;
    this.queued = undefined;
    if (queued) for (const chunk of queued) socket.write(chunk);
    if (d.ready === 'now') this.onConnect();
  }

  /** Sends a request head; `hasBody`: the caller streams a body with writeBody/endBody. */
  start(sink: ResponseSink, head: string, headRequest: boolean, hasBody: boolean, connectTimeoutMs: number): void {
    this.sink = sink;
    this.finished = false;
    this.bodySent = !hasBody;
    this.responseDone = false;
    this.keepAlive = false;
    this.parser.expect(headRequest);
    if (!this.connected) {
      this.connectTimer = setTimeout(() => this.fail(timeoutError('connect', connectTimeoutMs)), connectTimeoutMs);
    }
    // Connected, the idle limit runs (until then the connect limit does, TLS included): one timer
    // for the exchange's and the pool's limit, which onTimeout tells apart.
    if (this.connected) this.idle?.arm(this.pool.quietLimitMs);
    // A latin1 write keeps only a character's low byte (U+010A goes as LF): a head that holds
    // one past U+00FF (a caller that built it without requestHead's checks) would not go as
    // built, and could split into two requests. It fails the exchange, with nothing sent.
    if (changedByLatin1(head)) {
      this.fail(new InvalidHeaderError('request head'));
      return;
    }
    if (this.socket) this.socket.write(head, 'latin1');
    else this.queued?.push(Buffer.from(head, 'latin1'));
  }

  /** Runs `cb` once the connection can carry bytes (at once when it already can). */
  onceConnected(cb: () => void): void {
    if (this.connected) cb();
    else this.whenConnected.push(cb);
  }

  writeBody(chunk: Buffer | string): boolean { return this.write(chunk); }

  /** One chunk of a chunked body, framed, in one corked write. */
  writeChunk(chunk: Buffer): boolean {
    const socket = this.socket;
    socket?.cork();
    this.write(`${chunk.length.toString(16)}\r\n`);
    this.write(chunk);
    const ok = this.write('\r\n');
    socket?.uncork();
    return ok;
  }

  /** Runs `cb` when the connection takes writes again after writeBody returned false. */
  onceDrain(cb: () => void): void {
    if (this.socket) this.socket.once('drain', cb);
    else queueMicrotask(cb);
  }

  endBody(): void {
    this.bodySent = true;
    this.maybeRelease();
  }

  pause(): void { this.socket?.pause(); }
  resume(): void { this.socket?.resume(); }

  /** Abandons the exchange: the connection cannot be reused. */
  destroy(): void {
    this.sink = undefined;
    this.close();
  }

  /** Closes the socket (or the one still being dialled, when it comes). */
  close(): void {
    this.destroyed = true;
    this.queued = undefined;
    this.socket?.destroy();
  }

  /** Back in the pool: the pool's limit, if an exchange's longer one was armed meanwhile. */
  parked(): void { this.idle?.arm(this.pool.quietLimitMs); }

  onHead(status: number, statusText: string, headers: string[]): void { this.sink?.onHead(status, statusText, headers); }
  onBody(chunk: Buffer): void { this.sink?.onBody(chunk); }
  onComplete(trailers: string[] | undefined, keepAlive: boolean): void {
    this.responseDone = true;
    this.keepAlive = keepAlive;
    const sink = this.sink;
    this.maybeRelease();
    sink?.onComplete(trailers, keepAlive);
  }

  private write(chunk: Buffer | string): boolean {
    if (this.socket) return this.socket.write(chunk);
    this.queued?.push(chunk);
    return true;
  }

  private maybeRelease(): void {
    if (!this.responseDone || this.finished) return;
    if (!this.bodySent) {
      // The backend answered before taking the whole body: the rest would be read as a request.
      this.keepAlive = false;
    }
    this.finished = true;
    this.sink = undefined;
    this.reused = true;
    // The exchange may have paused reading for backpressure and will not resume it now.
    this.socket?.resume();
    if (this.keepAlive && this.bodySent) this.pool.release(this);
    else this.close();
  }

  private readonly onConnect = (): void => {
    this.connected = true;
    clearTimeout(this.connectTimer);
    this.idle?.arm(this.pool.quietLimitMs);
    for (const cb of this.whenConnected.splice(0)) cb();
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.sink === undefined) {
      // Bytes on an idle connection: nothing may use it any more.
      if (this.finished) { this.pool.forget(this); this.close(); }
      return;
    }
    try {
      this.parser.execute(chunk);
    } catch (err) {
      this.fail(err as NodeJS.ErrnoException);
    }
  };

  private readonly onEnd = (): void => {
    if (this.sink !== undefined && !this.parser.eof()) {
      this.fail(Object.assign(new Error('backend closed the connection'), { code: 'ECONNRESET' }));
    }
    this.close();
  };

  private readonly onError = (err: NodeJS.ErrnoException): void => { this.fail(err); };

  /**
   * The shorter of the two limits ran out. Idle in the pool (idleMs): closed. During an exchange
   * (ioTimeoutMs): the exchange fails once the quiet reaches that limit; none: nothing happens
   * (node arms the timer again at the next byte).
   */
  private readonly onTimeout = (): void => {
    const limit = this.sink !== undefined ? this.pool.ioTimeoutMs : this.pool.idleMs;
    if (limit === 0) return;
    if (!this.idle?.expired(limit)) return;
    if (this.sink !== undefined) {
      this.fail(timeoutError('io', this.pool.ioTimeoutMs));
      return;
    }
    this.pool.forget(this);
    this.close();
  };

  private readonly onClose = (): void => {
    clearTimeout(this.connectTimer);
    this.pool.forget(this);
    if (this.sink !== undefined) this.fail(Object.assign(new Error('backend connection closed'), { code: 'ECONNRESET' }));
  };

  private fail(err: UpstreamConnectionError): void {
    clearTimeout(this.connectTimer);
    const sink = this.sink;
    this.sink = undefined;
    this.finished = true;
    this.close();
    sink?.onFailure(err, this.parser.started);
  }
}

export interface UpstreamPoolOptions {
  /** An idle connection closes after this, before a typical backend (node: 5 s) closes its side. */
  idleMs: number;
  maxIdlePerKey?: number;
  /**
   * Idle connections of all keys together; past it, the one parked longest in the group holding
   * the most is closed. Absent: no cap but the keys'. A pool whose keys multiply (the egress
   * proxy's name the sandbox) needs it.
   */
  maxIdleTotal?: number;
  /**
   * The group a key belongs to (the egress proxy: its sandbox), so that one group's idle
   * connections are capped (maxIdlePerGroup) and the total's evictions fall on the group holding
   * the most: one sandbox parking sockets to a thousand names cannot flush the others'. Absent:
   * one group.
   */
  groupOf?: (key: string) => string;
  /** Idle connections of one group; past it, the group's longest parked is closed. Absent: no cap. */
  maxIdlePerGroup?: number;
  /** How long an exchange may wait on the upstream without a byte either way; 0 or absent: no limit. */
  ioTimeoutMs?: number;
}

/**
 * Idle keep-alive connections per key (an upstream as its user tells them apart: `address:port`
 * for the data plane, scheme, name, address, port and proxy for the egress proxy), reused
 * most-recent first.
 */
export class UpstreamPool {
  private readonly idle = new Map<string, UpstreamConnection[]>();
  private readonly maxIdlePerKey: number;
  private readonly maxIdleTotal: number;
  private readonly maxIdlePerGroup: number;
  /** The same connections as `idle`, by group in parking order, for the caps. */
  private readonly parked: IdleGroups<UpstreamConnection>;
  readonly idleMs: number;
  readonly ioTimeoutMs: number;
  /** What a connected socket's timer is armed with: the shorter of the two limits (0: neither). */
  readonly quietLimitMs: number;

  constructor(o: UpstreamPoolOptions) {
    this.idleMs = o.idleMs;
    this.maxIdlePerKey = o.maxIdlePerKey ?? 128;
    this.maxIdleTotal = o.maxIdleTotal ?? Infinity;
    this.maxIdlePerGroup = o.maxIdlePerGroup ?? Infinity;
    this.parked = new IdleGroups(o.groupOf ?? (() => ''));
    this.ioTimeoutMs = o.ioTimeoutMs ?? 0;
    const limits = [this.idleMs, this.ioTimeoutMs].filter((ms) => ms > 0);
    this.quietLimitMs = limits.length ? Math.min(...limits) : 0;
  }

  /** An idle connection of this key, or a new one opened with `dial`. */
  acquire(key: string, dial: Dial): UpstreamConnection {
    const list = this.idle.get(key);
    if (list !== undefined) {
      let conn = list.pop();
      while (conn !== undefined && conn.isDestroyed) { this.parked.delete(conn); conn = list.pop(); }
      if (list.length === 0) this.idle.delete(key);
      if (conn !== undefined) { this.parked.delete(conn); return conn; }
    }
    return new UpstreamConnection(key, dial, this);
  }

  release(conn: UpstreamConnection): void {
    let list = this.idle.get(conn.key);
    if (list === undefined) { list = []; this.idle.set(conn.key, list); }
    if (list.length >= this.maxIdlePerKey) { conn.close(); return; }
    list.push(conn);
    const group = this.parked.add(conn);
    conn.parked();
    if (group.size > this.maxIdlePerGroup) this.closeOldest(group);
    else if (this.parked.size > this.maxIdleTotal) this.closeOldest(this.parked.largest());
  }

  private closeOldest(group: ReadonlySet<UpstreamConnection>): void {
    const oldest = IdleGroups.oldest(group);
    this.forget(oldest);
    oldest.close();
  }

  /** Drops a connection from the idle lists (it closed, or went bad). */
  forget(conn: UpstreamConnection): void {
    this.parked.delete(conn);
    const list = this.idle.get(conn.key);
    if (list === undefined) return;
    const i = list.indexOf(conn);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(conn.key);
  }

  /** Closes every idle connection whose key `matches` (after a pause, a sandbox's may lead nowhere). */
  dropIdle(matches: (key: string) => boolean): void {
    for (const [key, list] of this.idle) {
      if (!matches(key)) continue;
      this.idle.delete(key);
      for (const c of list) { this.parked.delete(c); c.close(); }
    }
  }

  get idleCount(): number {
    return this.parked.size;
  }

  closeAll(): void {
    for (const list of this.idle.values()) for (const c of list) c.close();
    this.idle.clear();
    this.parked.clear();
  }
}
