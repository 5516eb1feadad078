/**
 * A lean keep-alive HTTP/1.1 client on raw sockets, so that a load generator costs little and the
 * same on every path it compares (bench/proxy.ts, bench/egress.ts).
 */
import type { Socket } from 'node:net';

export class KeepAliveConn {
  private readonly socket: Socket;
  private buf: Buffer = Buffer.alloc(0);
  private waiting: ((status: number) => void) | undefined;
  private failed: ((err: Error) => void) | undefined;
  readonly ready: Promise<void>;

  /** open: a connected (or connecting) socket; readyEvent: `connect`, or `secureConnect` for TLS. */
  constructor(open: () => Socket, readyEvent: 'connect' | 'secureConnect', private readonly requestBytes: Buffer, private readonly name = 'upstream') {
    this.socket = open();
    this.ready = new Promise((resolve, reject) => {
      this.socket.once(readyEvent, () => resolve());
      this.socket.once('error', reject);
    });
    this.socket.on('data', (d: Buffer) => this.onData(d));
    this.socket.on('error', (err) => this.failed?.(err));
    this.socket.on('close', () => this.failed?.(new Error(`${this.name}: connection closed`)));
  }

  send(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.failed = reject;
      this.socket.write(this.requestBytes);
    });
  }

  close() { this.failed = undefined; this.socket.destroy(); }

  private onData(d: Buffer) {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    const parsed = parseResponse(this.buf);
    if (parsed === null) return;
    this.buf = this.buf.subarray(parsed.length);
    const done = this.waiting;
    this.waiting = undefined;
    this.failed = undefined;
    done?.(parsed.status);
  }
}

/** One complete response at the start of buf: its status and total length; null if incomplete. */
export function parseResponse(buf: Buffer): { status: number; length: number } | null {
  const headEnd = buf.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  const head = buf.toString('latin1', 0, headEnd);
  const status = Number(head.slice(9, 12));
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  let pos = headEnd + 4;
  if (status === 204 || status === 304) return { status, length: pos };
  if (cl) {
    const end = pos + Number(cl[1]);
    return buf.length >= end ? { status, length: end } : null;
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', pos);
      if (lineEnd < 0) return null;
      const size = parseInt(buf.toString('latin1', pos, lineEnd), 16);
      pos = lineEnd + 2;
      if (size === 0) {
        const trailerEnd = buf.indexOf('\r\n', pos);
        return trailerEnd < 0 ? null : { status, length: trailerEnd + 2 };
      }
      pos += size + 2;
      if (pos > buf.length) return null;
    }
  }
  return { status, length: pos };
}
