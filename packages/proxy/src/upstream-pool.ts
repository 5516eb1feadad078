import { connect, type Socket } from 'node:net';
import { ResponseParser, type ResponseEvents } from './response-parser.ts';

/** Where one exchange's response goes. */
export interface ResponseSink extends ResponseEvents {
  /** The connection failed; `responseStarted`: some of the response had arrived already. */
  onFailure(err: NodeJS.ErrnoException, responseStarted: boolean): void;
}

/**
 * One keep-alive HTTP/1.1 connection to a sandbox port, carrying one exchange at a time.
 * The request head is written in a single write; the response is parsed by ResponseParser.
 */
export class UpstreamConnection implements ResponseEvents {
  readonly socket: Socket;
  /** Served an exchange before this one (a stale keep-alive socket is then a retryable failure). */
  reused = false;
  private connected = false;
  private sink: ResponseSink | undefined;
  private readonly parser = new ResponseParser(this);
  private bodySent = true;
  private responseDone = true;
  private keepAlive = false;
  private connectTimer: NodeJS.Timeout | undefined;
  private finished = false;

  constructor(readonly key: string, host: string, port: number, private readonly pool: UpstreamPool) {
    this.socket = connect({ host, port, noDelay: true });
    this.socket.on('connect', this.onConnect);
    this.socket.on('data', this.onData);
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    this.socket.on('timeout', this.onIdleTimeout);
  }

  get isConnected() { return this.connected; }

  /** Sends a request head; `hasBody`: the caller streams a body with writeBody/endBody. */
  start(sink: ResponseSink, head: string, headRequest: boolean, hasBody: boolean, connectTimeoutMs: number): void {
    this.sink = sink;
    this.finished = false;
    this.bodySent = !hasBody;
    this.responseDone = false;
    this.keepAlive = false;
    this.parser.expect(headRequest);
    if (!this.connected) {
      this.connectTimer = setTimeout(() => this.fail(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), connectTimeoutMs);
    }
    this.socket.write(head, 'latin1');
  }

  writeBody(chunk: Buffer | string): boolean { return this.socket.write(chunk); }

  endBody(): void {
    this.bodySent = true;
    this.maybeRelease();
  }

  pause(): void { this.socket.pause(); }
  resume(): void { this.socket.resume(); }

  /** Abandons the exchange: the connection cannot be reused. */
  destroy(): void {
    this.sink = undefined;
    this.socket.destroy();
  }

  onHead(status: number, statusText: string, headers: string[]): void { this.sink?.onHead(status, statusText, headers); }
  onBody(chunk: Buffer): void { this.sink?.onBody(chunk); }
  onComplete(trailers: string[] | undefined, keepAlive: boolean): void {
    this.responseDone = true;
    this.keepAlive = keepAlive;
    const sink = this.sink;
    this.maybeRelease();
    sink?.onComplete(trailers, keepAlive);
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
    this.socket.resume();
    if (this.keepAlive && this.bodySent) this.pool.release(this);
    else this.socket.destroy();
  }

  private readonly onConnect = (): void => {
    this.connected = true;
    clearTimeout(this.connectTimer);
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.sink === undefined) {
      // Bytes on an idle connection: nothing may use it any more.
      if (this.finished) { this.pool.forget(this); this.socket.destroy(); }
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
    this.socket.destroy();
  };

  private readonly onError = (err: NodeJS.ErrnoException): void => { this.fail(err); };

  /** Only armed while idle in the pool (UpstreamPool.release). */
  private readonly onIdleTimeout = (): void => {
    if (this.sink !== undefined) return;
    this.pool.forget(this);
    this.socket.destroy();
  };

  private readonly onClose = (): void => {
    clearTimeout(this.connectTimer);
    this.pool.forget(this);
    if (this.sink !== undefined) this.fail(Object.assign(new Error('backend connection closed'), { code: 'ECONNRESET' }));
  };

  private fail(err: NodeJS.ErrnoException): void {
    clearTimeout(this.connectTimer);
    const sink = this.sink;
    this.sink = undefined;
    this.finished = true;
    this.socket.destroy();
    sink?.onFailure(err, this.parser.started);
  }
}

/**
 * Idle keep-alive connections per backend (`address:port`), reused most-recent first. Idle
 * connections close after idleMs, before a typical backend (node: 5 s) closes its side.
 */
export class UpstreamPool {
  private readonly idle = new Map<string, UpstreamConnection[]>();

  constructor(private readonly idleMs: number, private readonly maxIdlePerBackend = 128) {}

  acquire(host: string, port: number): UpstreamConnection {
    const key = `${host}:${port}`;
    const list = this.idle.get(key);
    if (list !== undefined) {
      let conn = list.pop();
      while (conn !== undefined && conn.socket.destroyed) conn = list.pop();
      if (list.length === 0) this.idle.delete(key);
      if (conn !== undefined) {
        conn.socket.setTimeout(0);
        return conn;
      }
    }
    return new UpstreamConnection(key, host, port, this);
  }

  release(conn: UpstreamConnection): void {
    let list = this.idle.get(conn.key);
    if (list === undefined) { list = []; this.idle.set(conn.key, list); }
    if (list.length >= this.maxIdlePerBackend) { conn.socket.destroy(); return; }
    list.push(conn);
    conn.socket.setTimeout(this.idleMs);
  }

  /** Drops a connection from the idle lists (it closed, or went bad). */
  forget(conn: UpstreamConnection): void {
    const list = this.idle.get(conn.key);
    if (list === undefined) return;
    const i = list.indexOf(conn);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(conn.key);
  }

  /** Closes every idle connection to an address (any port): after a pause they may lead nowhere. */
  dropIdle(address: string): void {
    for (const [key, list] of this.idle) {
      if (key.slice(0, key.lastIndexOf(':')) !== address) continue;
      this.idle.delete(key);
      for (const c of list) c.socket.destroy();
    }
  }

  get idleCount(): number {
    let n = 0;
    for (const list of this.idle.values()) n += list.length;
    return n;
  }

  closeAll(): void {
    for (const list of this.idle.values()) for (const c of list) c.socket.destroy();
    this.idle.clear();
  }
}
